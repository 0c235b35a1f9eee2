"""Float64 PyTorch reference of the Based and JRT-RNN models (tools/reference)."""
