# Red8: the cycle collector runs a finalizer wherever a collection starts, and in a traced call that is mostly inside
# the recorder's own dispatch, where its mode is off: Later.__del__ took the conv's mean into the output a marker
# kernel wrote, unrecorded (cyclic garbage made until it had run).
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def mark_kernel(out, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out + offs, tl.full((BLOCK,), 1.0, tl.float32), mask=offs < n)


class Later:
    def __init__(self, job):
        self.me, self.job = self, job

    def __del__(self):
        if self.job is not None:
            self.job()


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, output_padding, multiplier):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose2d(
            in_channels, out_channels, kernel_size, stride=stride, padding=padding, output_padding=output_padding
        )
        self.multiplier = multiplier

    def forward(self, x):
        y = self.conv_transpose(x)
        n = y.shape[0] * y.shape[1]
        out = torch.empty(n, device=x.device, dtype=x.dtype)
        mark_kernel[(1,)](out, n, BLOCK=triton.next_power_of_2(n))
        done = []
        m = self.multiplier

        def work():
            out.copy_(torch.mean(y * m, dim=[2, 3]).flatten())
            done.append(1)

        Later(work)  # a cycle: the collector runs its finalizer wherever a collection starts
        z = torch.zeros(1, device=x.device)
        for _ in range(200):  # until a collection has run it
            if done:
                break
            for _ in range(8):
                Later(None)
            z = z + 0.0
        return out.view(y.shape[0], y.shape[1], 1, 1)
