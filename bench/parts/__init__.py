"""The parts of bench/run_all.py, one module each (bench/bench_parts.py runs one)."""
