// Reading and writing NumPy .npy files (format versions 1.0-3.0, little-endian,
// C order), so inputs and outputs can be exchanged with any other runtime.
#pragma once

#include <string>

#include "edgeinfer/status.h"
#include "edgeinfer/tensor.h"

namespace edgeinfer {

Expected<Tensor> readNpy(const std::string& path);
Status writeNpy(const std::string& path, const Tensor& t);

}  // namespace edgeinfer
