// ONNX -> graph IR. Parsing uses Debian's libonnx protobuf classes; no hand-written parser.
//
// Order of work, so that users hear about every problem before any is worked on:
//   1. parse the protobuf, check IR version and the default-domain opset (7..17);
//   2. the model checker lists EVERY unsupported node (index, name, op type, opset) in one
//      Status (kUnsupported) -- see model_checker.cpp;
//   3. initializers, Constant nodes, inputs, nodes and attributes are translated;
//   4. version differences are normalised into one canonical form per op (normalize.cpp);
//   5. the graph is checked for undefined inputs, duplicate outputs and cycles.
#pragma once

#include <cstdint>
#include <string>

#include "edgeinfer/status.h"
#include "graph/graph.h"
#include "onnx/onnx_pb.h"

namespace edgeinfer::onnx_import {

inline constexpr int64_t kMinOpset = 7;
inline constexpr int64_t kMaxOpset = 17;

struct ImportOptions {
  std::string externalDataDir;  // where external tensor data lives
  int64_t maxTensorBytes = int64_t{4} << 30;
  bool allowNonFiniteWeights = false;  // reject NaN/Inf in float initializers
};

Expected<graph::Graph> importModel(const onnx::ModelProto& model, const ImportOptions& options);
Expected<graph::Graph> importFromBuffer(const void* data, size_t size,
                                        const ImportOptions& options);
Expected<graph::Graph> importFromFile(const std::string& path, ImportOptions options);

/// Reads and parses a ModelProto (exposed for tools/tests).
Status parseModel(const void* data, size_t size, onnx::ModelProto* model);

/// Lists every node the SDK cannot run; OK when all are supported.
Status checkModelSupport(const onnx::ModelProto& model, int64_t opset);

/// Rewrites one node from its opset-specific form to the canonical form (op_schema.h).
Status normalizeNode(graph::Graph& g, graph::Node& node, int64_t opset);

/// Reads an attribute proto into the IR attribute; kUnsupported for graph attributes.
Expected<graph::Attribute> attributeFromProto(const onnx::AttributeProto& a);

}  // namespace edgeinfer::onnx_import
