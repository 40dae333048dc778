// The up-front support check (onnx-tensorrt's supportsModel, done before any work): every
// node whose op we lack, or whose op is newer than the model's opset, is listed in one error.
#include <sstream>

#include "graph/op_schema.h"
#include "onnx/importer.h"

namespace edgeinfer::onnx_import {

Status checkModelSupport(const onnx::ModelProto& model, int64_t opset) {
  const auto& registry = graph::OpSchemaRegistry::instance();
  std::ostringstream list;
  int count = 0;
  int64_t firstIndex = -1;
  const auto& nodes = model.graph().node();
  for (int i = 0; i < nodes.size(); ++i) {
    const auto& n = nodes[i];
    const std::string domain = n.domain() == "ai.onnx" ? "" : n.domain();
    std::string why;
    if (!domain.empty()) {
      why = "domain '" + domain + "' is not supported";
    } else if (n.op_type() == "Constant") {
      continue;  // becomes an initializer
    } else if (n.op_type() == "Upsample") {
      if (opset > 9) why = "Upsample is deprecated from opset 10 on; use Resize";
      // otherwise rewritten into Resize by normalize.cpp
    } else {
      const graph::OpSchema* s = registry.find("", n.op_type());
      if (!s) {
        why = "no implementation of this op";
      } else if (opset < s->minOpset) {
        why = "the op needs opset >= " + std::to_string(s->minOpset);
      } else if (opset > s->maxOpset) {
        why = "opset " + std::to_string(opset) + " semantics not implemented (up to " +
              std::to_string(s->maxOpset) + ")";
      }
    }
    if (why.empty()) continue;
    if (count == 0) firstIndex = i;
    list << "\n  node #" << i << " '" << n.name() << "' (" << n.op_type() << ", opset " << opset
         << "): " << why;
    ++count;
  }
  if (count == 0) return Status::Ok();
  std::string msg = std::to_string(count) + " unsupported node" + (count > 1 ? "s" : "") +
                    " in the model:" + list.str();
  (void)firstIndex;
  return Status(ErrorCode::kUnsupported, msg);
}

}  // namespace edgeinfer::onnx_import
