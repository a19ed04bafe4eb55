"""Inductor's output module read as text (agent.inductor.translate uses it): its kernels' sources, its call(args)
function, and that function's body statement by statement in public torch (empty_strided_cuda -> torch.empty_strided
on the inputs' device, reinterpret_tensor -> torch.as_strided, extern_kernels.X -> torch.X, kernel.run(...) -> the
answer's launcher; device guards, streams and asserts dropped). What it does not know it refuses, naming it."""

from __future__ import annotations

import ast

from agent.errors import UserError
from agent.harness.worker.capture import KernelLaunch

# Inductor's extern kernels that are torch's own functions under the same name and arguments.
EXTERN = {"convolution", "mm", "addmm", "bmm", "baddbmm"}
DTYPES = {"float32", "float16", "bfloat16", "float64", "int8", "int16", "int32", "int64", "uint8", "bool"}
METHODS = {"item", "copy_"}  # tensor methods the wrapper may call on its buffers
DROPPED_CALLS = {"assert_size_stride", "assert_alignment", "torch.cuda.set_device"}
RESERVED = {"torch", "device", "nn", "triton", "tl", "libdevice"}  # names the answer's module and call functions use
_GRID_OPS = (ast.Add, ast.Sub, ast.Mult, ast.FloorDiv, ast.Mod)


class CannotTranslate(UserError):
    """Inductor's output holds something the translation does not know (named in the message)."""


def kernel_sources(tree: ast.Module) -> dict[str, str]:
    """name -> source of every `name = async_compile.triton('name', '''...''', ...)`; other compiled kinds refused."""
    out: dict[str, str] = {}
    for stmt in tree.body:
        if not (isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Call)):
            continue
        fn = ast.unparse(stmt.value.func)
        if not fn.startswith("async_compile."):
            continue
        if fn != "async_compile.triton":
            raise CannotTranslate(f"Inductor start: the code compiles a `{fn}` kernel (C++/CUDA, not Triton), which "
                                  "the translation does not know")
        args = stmt.value.args
        if len(args) < 2 or not all(isinstance(a, ast.Constant) and isinstance(a.value, str) for a in args[:2]):
            raise CannotTranslate("Inductor start: an async_compile.triton(...) call without its name and source")
        out[args[0].value] = args[1].value  # type: ignore[attr-defined]
    return out


def call_function(tree: ast.Module) -> ast.FunctionDef:
    for stmt in tree.body:
        if isinstance(stmt, ast.ClassDef) and stmt.name == "Runner":
            for item in stmt.body:
                if isinstance(item, ast.FunctionDef) and item.name == "call":
                    return item
        if isinstance(stmt, ast.FunctionDef) and stmt.name == "call":
            return stmt
    raise CannotTranslate("Inductor start: the output code has no call(args) function (a C++ wrapper?)")


def unpacked_args(body: list[ast.stmt]) -> list[str]:
    first = body[0] if body else None
    if isinstance(first, ast.Assign) and isinstance(first.value, ast.Name) and first.value.id == "args":
        target = first.targets[0]
        elts = target.elts if isinstance(target, ast.Tuple) else [target]
        if all(isinstance(e, ast.Name) for e in elts):
            return [e.id for e in elts]  # type: ignore[attr-defined]
    raise CannotTranslate("Inductor start: call() does not begin by unpacking its args")


def input_layouts(body: list[ast.stmt], names: list[str]) -> dict[str, tuple[tuple[int, ...], tuple[int, ...]]]:
    """The (size, stride) Inductor asserts for each input (its code indexes them with exactly these)."""
    out = {}
    for stmt in body:
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) and \
                ast.unparse(stmt.value.func) == "assert_size_stride":
            args = stmt.value.args
            if len(args) >= 3 and isinstance(args[0], ast.Name) and args[0].id in names:
                try:
                    size, stride = ast.literal_eval(args[1]), ast.literal_eval(args[2])
                except ValueError:
                    raise CannotTranslate(f"Inductor start: {args[0].id}'s sizes are symbols (dynamic shapes)") from None
                out[args[0].id] = (tuple(size), tuple(stride))
    return out


def launcher(name: str, launch: KernelLaunch) -> str:
    """`launch_NAME(runtime args)`: the grid from Inductor's recorded expressions, then the launch with its config."""
    missing = [k for k in launch.config if k not in launch.arg_names]
    if missing:
        raise CannotTranslate(f"Inductor start: kernel {name}'s config sets {', '.join(missing)}, not an argument of it")
    if launch.grid_type not in ("", "Grid1D", "Grid2D", "Grid3D"):
        raise CannotTranslate(f"Inductor start: kernel {name} has a {launch.grid_type} grid, which the translation "
                              "does not know")
    params = [a for a in launch.arg_names if a not in launch.config]
    known = set(params)
    lines = []
    for line in launch.grid_prefix:
        try:
            stmts = ast.parse(line).body
        except SyntaxError:
            raise CannotTranslate(f"Inductor start: kernel {name}'s grid line `{line}` does not parse") from None
        for s in stmts:
            if not (isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name)):
                raise CannotTranslate(f"Inductor start: kernel {name}'s grid line `{line}` is not an assignment")
            lines.append(f"{s.targets[0].id} = {_grid_expr(s.value, known, launch.config, name)}")
            known.add(s.targets[0].id)
    dims = []
    for g in launch.grid:
        try:
            expr = ast.parse(g, mode="eval").body
        except SyntaxError:
            raise CannotTranslate(f"Inductor start: kernel {name}'s grid `{g}` does not parse") from None
        dims.append(_grid_expr(expr, known, launch.config, name))
    meta = [f"{k}={v}" for k, v in launch.config.items()] + [f"num_warps={launch.num_warps}",
                                                               f"num_stages={launch.num_stages}"]
    body = "".join(f"    {x}\n" for x in lines)
    return (f"def launch_{name}({', '.join(params)}):\n{body}"
            f"    {name}[({', '.join(dims)},)]({', '.join([*params, *meta])})")


def _grid_expr(node: ast.expr, known: set[str], config: dict[str, int], kernel: str) -> str:
    """Integer arithmetic on the kernel's arguments (block sizes as the constants chosen), or refused."""
    def check(n: ast.expr) -> ast.expr:
        if isinstance(n, ast.Constant) and type(n.value) is int:
            return n
        if isinstance(n, ast.Name) and n.id in config:
            return ast.Constant(config[n.id])
        if isinstance(n, ast.Name) and n.id in known:
            return n
        if isinstance(n, ast.BinOp) and isinstance(n.op, _GRID_OPS):
            return ast.BinOp(left=check(n.left), op=n.op, right=check(n.right))
        if isinstance(n, ast.UnaryOp) and isinstance(n.op, (ast.USub, ast.UAdd)):
            return ast.UnaryOp(op=n.op, operand=check(n.operand))
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in ("min", "max") and not n.keywords:
            return ast.Call(func=n.func, args=[check(a) for a in n.args], keywords=[])
        raise CannotTranslate(f"Inductor start: kernel {kernel}'s grid uses `{ast.unparse(n)}`, which the "
                              "translation does not know")
    return ast.unparse(check(node))


# ---------------------------------------------------------------- the wrapper's body


class Wrapper:
    """Inductor's call() body statement by statement: what the answer needs kept (in public torch), the rest
    dropped, anything unknown refused."""

    def __init__(self, kernels: dict[str, str], launches: dict[str, KernelLaunch], bound: set[str], returns: str):
        self.kernels, self.launches, self.bound, self.returns = kernels, launches, bound, returns

    def block(self, body: list[ast.stmt]) -> list[ast.stmt]:
        out: list[ast.stmt] = []
        for stmt in body:
            out += self.stmt(stmt)
        return out

    def stmt(self, s: ast.stmt) -> list[ast.stmt]:
        if isinstance(s, ast.Assign) and isinstance(s.value, ast.Name) and s.value.id == "args":
            return []  # the inputs are the call function's parameters
        if isinstance(s, ast.Assign) and isinstance(s.value, ast.Call) and ast.unparse(s.value.func) == "get_raw_stream":
            return []  # launches go to the current stream
        if isinstance(s, ast.With) and len(s.items) == 1 and isinstance(s.items[0].context_expr, ast.Call) and \
                ast.unparse(s.items[0].context_expr.func) == "torch.cuda._DeviceGuard":
            return self.block(s.body)  # the harness runs the answer on its device
        if isinstance(s, ast.Expr) and isinstance(s.value, ast.Call):
            fn = ast.unparse(s.value.func)
            if fn in DROPPED_CALLS or fn == "args.clear":
                return []
            if fn.endswith(".run") and fn[:-4] in self.kernels:
                return [ast.Expr(self.launch(s.value, fn[:-4]))]
            return [ast.Expr(self.expr(s.value))]
        if isinstance(s, ast.Assign) and all(isinstance(t, ast.Name) for t in s.targets):
            return [ast.Assign(targets=s.targets, value=self.expr(s.value))]
        if isinstance(s, ast.Delete):
            return [s]
        if isinstance(s, ast.Return) and isinstance(s.value, ast.Tuple):
            elts = [self.expr(e) for e in s.value.elts]
            if self.returns == "tensor":
                if len(elts) != 1:
                    raise CannotTranslate(f"Inductor start: call() returns {len(elts)} tensors where the Model returns one")
                return [ast.Return(elts[0])]
            return [ast.Return(ast.Tuple(elts=elts, ctx=ast.Load()))]
        raise CannotTranslate(f"Inductor start: call() has `{ast.unparse(s).splitlines()[0][:80]}`, which the "
                              "translation does not know")

    def launch(self, call: ast.Call, kernel: str) -> ast.Call:
        launch = self.launches[kernel]
        params = [a for a in launch.arg_names if a not in launch.config]
        extra = [k.arg for k in call.keywords if k.arg != "stream"]
        if extra or len(call.args) != len(params):
            raise CannotTranslate(f"Inductor start: {kernel}.run() passes {len(call.args)} arguments"
                                  f"{' and ' + ', '.join(map(str, extra)) if extra else ''}; the kernel takes "
                                  f"{', '.join(params)} besides its config")
        return ast.Call(func=ast.Name(id=f"launch_{self.kernels[kernel]}", ctx=ast.Load()),
                        args=[self.expr(a) for a in call.args], keywords=[])

    def expr(self, e: ast.expr) -> ast.expr:
        if isinstance(e, ast.Constant):
            return e
        if isinstance(e, ast.Name):
            if e.id in self.bound:
                return e
            raise CannotTranslate(f"Inductor start: call() uses `{e.id}`, which it does not define (a constant of "
                                  "the compiled graph the capture does not carry?)")
        if isinstance(e, (ast.Tuple, ast.List)):
            return type(e)(elts=[self.expr(x) for x in e.elts], ctx=ast.Load())
        if isinstance(e, ast.BinOp):
            return ast.BinOp(left=self.expr(e.left), op=e.op, right=self.expr(e.right))
        if isinstance(e, ast.UnaryOp):
            return ast.UnaryOp(op=e.op, operand=self.expr(e.operand))
        if isinstance(e, ast.Attribute) and isinstance(e.value, ast.Name) and e.value.id == "torch" and e.attr in DTYPES:
            return e
        if isinstance(e, ast.Call):
            return self.call(e)
        raise CannotTranslate(f"Inductor start: call() has `{ast.unparse(e)[:80]}`, which the translation does not know")

    def call(self, e: ast.Call) -> ast.expr:
        fn = ast.unparse(e.func)
        args = [self.expr(a) for a in e.args]
        kws = [ast.keyword(arg=k.arg, value=self.expr(k.value)) for k in e.keywords]
        if fn == "empty_strided_cuda" and len(args) == 3 and not kws:
            return _torch("empty_strided", args[:2], [ast.keyword(arg="dtype", value=args[2]),
                                                      ast.keyword(arg="device", value=ast.Name(id="device", ctx=ast.Load()))])
        if fn == "reinterpret_tensor" and len(args) == 4 and not kws:
            base, size, stride, offset = args
            if isinstance(offset, ast.Constant) and offset.value == 0:
                return _torch("as_strided", [base, size, stride], [])  # keeps the base's own storage offset
            if not isinstance(base, ast.Name):
                raise CannotTranslate(f"Inductor start: `{ast.unparse(e)[:80]}` offsets a view of a view")
            shifted = ast.BinOp(left=ast.Call(func=ast.Attribute(value=base, attr="storage_offset", ctx=ast.Load()),
                                              args=[], keywords=[]), op=ast.Add(), right=offset)
            return _torch("as_strided", [base, size, stride, shifted], [])
        if fn.startswith("extern_kernels.") and fn.split(".", 1)[1] in EXTERN:
            return _torch(fn.split(".", 1)[1], args, kws)
        if isinstance(e.func, ast.Attribute) and isinstance(e.func.value, ast.Name) and e.func.value.id in self.bound \
                and e.func.attr in METHODS:
            return ast.Call(func=e.func, args=args, keywords=kws)
        raise CannotTranslate(f"Inductor start: call() calls `{fn}`, which the translation does not know")


def _torch(name: str, args: list[ast.expr], kws: list[ast.keyword]) -> ast.Call:
    return ast.Call(func=ast.Attribute(value=ast.Name(id="torch", ctx=ast.Load()), attr=name, ctx=ast.Load()),
                    args=args, keywords=kws)
