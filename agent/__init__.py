"""agent: an Nsight Compute-driven optimization agent for Triton kernels."""

__version__ = "0.1.0"
