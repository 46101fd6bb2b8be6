// lwsplit-harness shim for the torch wheel's <torch/torch.h> (first on the include path of the
// tensor library's build, as every shim here). The allocation files use tensors, factories (zeros, from_blob,
// index_select), dtypes and devices (torch/types.h) and tensor_helper.h's torch::pickle_load/save
// (torch/serialize.h); the full header adds nn, optim, data and jit, which none of them names. Same
// functions, same libtorch: the unity build parses in ~13 s instead of ~23 s.
#pragma once
#include <torch/serialize.h>
#include <torch/types.h>
