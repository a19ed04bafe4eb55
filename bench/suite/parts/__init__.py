"""The parts of bench/suite/run_all.py, one module each (bench/suite/bench_parts.py runs one)."""
