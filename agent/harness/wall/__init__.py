"""The OS wall and its processes: the sandbox, its limits, the process tree, the GPU's lock."""
