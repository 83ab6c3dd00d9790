"""The CUDA backend (runtime/cuda/backend.py); NVIDIA's packages load only when it is used."""

from fusejit.runtime.cuda import backend as backend
