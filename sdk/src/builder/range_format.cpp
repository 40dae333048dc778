#include "builder/range_format.h"

#include "builder/container_format.h"
#include "runtime/graph_engine.h"

namespace edgeinfer::builder {
namespace {

const ContainerKind kKind{kRangeMagic, kRangeFormatVersion, "engine with shape ranges"};

Status corrupt(const std::string& what) {
  return Status(ErrorCode::kCorruptFile, std::string(kKind.name) + ": " + what);
}

/// The PassOptions fields by their name in the file.
std::vector<std::pair<const char*, bool PassOptions::*>> passFields() {
  return {{"constant_folding", &PassOptions::constantFolding},
          {"eliminate_identity", &PassOptions::eliminateIdentity},
          {"eliminate_dead_nodes", &PassOptions::eliminateDeadNodes},
          {"fold_batchnorm", &PassOptions::foldBatchNorm},
          {"fuse_conv_activation", &PassOptions::fuseConvActivation},
          {"fuse_gemm_activation", &PassOptions::fuseGemmActivation},
          {"fuse_elementwise", &PassOptions::fuseElementwise},
          {"explicit_quantization", &PassOptions::explicitQuantization},
          {"lower_qoperators", &PassOptions::lowerQOperators}};
}

Expected<Precision> precisionFrom(const nlohmann::json& j, const std::string& where) {
  if (j.is_string()) {
    const std::string s = j.get<std::string>();
    for (Precision p : {Precision::kFp32, Precision::kFp16, Precision::kInt8})
      if (s == precisionName(p)) return p;
  }
  return corrupt(where + " is not a precision (fp32, fp16 or int8)");
}

Expected<bool> boolField(const nlohmann::json& o, const char* key) {
  const auto it = o.find(key);
  if (it == o.end() || !it->is_boolean())
    return corrupt(std::string("the build options have no true/false '") + key + "'");
  return it->get<bool>();
}

}  // namespace

bool isRangeContainer(const void* data, size_t size) {
  return isContainer(kKind, data, size);
}

BuilderConfig rangeBuildOptions(const BuilderConfig& c) {
  BuilderConfig b;
  b.precision = c.precision;
  b.strictPrecision = c.strictPrecision;
  b.int8BitExact = c.int8BitExact;
  b.allowCpuFallback = c.allowCpuFallback;
  b.allowNonFiniteWeights = c.allowNonFiniteWeights;
  b.maxTensorBytes = c.maxTensorBytes;
  b.passes = c.passes;
  b.layerPrecision = c.layerPrecision;
  return b;
}

Status checkShapeRanges(const ShapeRanges& ranges, ErrorCode code) {
  for (const auto& [name, r] : ranges) {
    const auto error = [&](const std::string& what) {
      return Status(code, "shape range of input '" + name + "' (" + formatShapeRanges({{name, r}}) +
                              "): " + what);
    };
    if (r.min.rank() != r.opt.rank() || r.opt.rank() != r.max.rank())
      return error("min, opt and max have ranks " + std::to_string(r.min.rank()) + ", " +
                   std::to_string(r.opt.rank()) + " and " + std::to_string(r.max.rank()) +
                   "; they need one rank");
    for (size_t d = 0; d < r.opt.rank(); ++d) {
      if (r.min[d] < 1)
        return error("dim " + std::to_string(d) + " of min is " + std::to_string(r.min[d]) +
                     ", not a size (sizes are >= 1)");
      if (r.min[d] > r.opt[d] || r.opt[d] > r.max[d])
        return error("dim " + std::to_string(d) + " is " + std::to_string(r.min[d]) + " .. " +
                     std::to_string(r.opt[d]) + " .. " + std::to_string(r.max[d]) +
                     ": it needs min <= opt <= max");
    }
  }
  return Status::Ok();
}

Expected<std::vector<uint8_t>> encodeRangeContainer(const RangeSpec& spec,
                                                    const std::vector<uint8_t>& source,
                                                    const std::vector<uint8_t>& opt,
                                                    const std::vector<uint8_t>& weights) {
  nlohmann::json h = nlohmann::json::object();
  nlohmann::json ranges = nlohmann::json::object();
  for (const auto& [name, r] : spec.ranges)
    ranges[name] = {{"min", r.min.dims()}, {"opt", r.opt.dims()}, {"max", r.max.dims()}};
  h["ranges"] = std::move(ranges);
  h["opt_shapes"] = shapesToJson(spec.optShapes);
  h["output_shapes"] = shapesToJson(spec.outputShapes);
  const BuilderConfig& c = spec.build;
  nlohmann::json b = nlohmann::json::object();
  b["precision"] = precisionName(c.precision);
  b["strict_precision"] = c.strictPrecision;
  b["int8_bit_exact"] = c.int8BitExact;
  b["allow_cpu_fallback"] = c.allowCpuFallback;
  b["allow_non_finite_weights"] = c.allowNonFiniteWeights;
  b["max_tensor_bytes"] = c.maxTensorBytes;
  nlohmann::json passes = nlohmann::json::object();
  for (const auto& [key, field] : passFields()) passes[key] = c.passes.*field;
  b["passes"] = std::move(passes);
  nlohmann::json lp = nlohmann::json::object();
  for (const auto& [layer, p] : c.layerPrecision) lp[layer] = precisionName(p);
  b["layer_precision"] = std::move(lp);
  h["build"] = std::move(b);
  h["tactics"] = spec.tactics;
  return encodeContainer(kKind, std::move(h), {source, opt}, weights);
}

Expected<DecodedRangeContainer> decodeRangeContainer(const void* data, size_t size) {
  EI_ASSIGN_OR_RETURN(DecodedContainer c, decodeContainer(kKind, data, size));
  const nlohmann::json& h = c.header;
  if (c.blobs.size() != 2)
    return corrupt("it holds " + std::to_string(c.blobs.size()) +
                   " engine files, not 2 (the model and the opt build)");
  DecodedRangeContainer d;
  d.source = c.blobs[0];
  d.opt = c.blobs[1];
  d.weights = c.weights;

  const auto ranges = h.find("ranges");
  if (ranges == h.end() || !ranges->is_object() || ranges->empty())
    return corrupt("the header has no shape ranges");
  for (const auto& [name, r] : ranges->items()) {
    ShapeRange range;
    for (const auto& [key, field] :
         {std::pair<const char*, Shape ShapeRange::*>{"min", &ShapeRange::min},
          {"opt", &ShapeRange::opt},
          {"max", &ShapeRange::max}}) {
      if (!r.is_object() || !r.contains(key))
        return corrupt("the range of '" + name + "' has no " + key);
      EI_ASSIGN_OR_RETURN(ShapeProfile one, shapesFromJson(kKind, nlohmann::json{{name, r[key]}},
                                                           std::string("the range's ") + key));
      range.*field = one[name];
    }
    d.spec.ranges[name] = std::move(range);
  }
  EI_RETURN_IF_ERROR(checkShapeRanges(d.spec.ranges, ErrorCode::kCorruptFile));

  const auto opt = h.find("opt_shapes");
  if (opt == h.end()) return corrupt("the header has no opt shapes");
  EI_ASSIGN_OR_RETURN(d.spec.optShapes, shapesFromJson(kKind, *opt, "the opt shapes"));
  for (const auto& [name, r] : d.spec.ranges) {
    const auto it = d.spec.optShapes.find(name);
    if (it == d.spec.optShapes.end() || it->second != r.opt)
      return corrupt("the opt shapes do not give input '" + name + "' its range's opt shape " +
                     runtime::shapeText(r.opt));
  }

  const auto outs = h.find("output_shapes");
  if (outs == h.end()) return corrupt("the header has no output shapes");
  EI_ASSIGN_OR_RETURN(d.spec.outputShapes, shapesFromJson(kKind, *outs, "the output shapes"));

  const auto b = h.find("build");
  if (b == h.end() || !b->is_object()) return corrupt("the header has no build options");
  BuilderConfig& cfg = d.spec.build;
  EI_ASSIGN_OR_RETURN(cfg.precision,
                      precisionFrom(b->value("precision", nlohmann::json()), "the precision"));
  EI_ASSIGN_OR_RETURN(cfg.strictPrecision, boolField(*b, "strict_precision"));
  // Absent from files written before the fast INT8 rounding existed: those were bit-exact.
  cfg.int8BitExact = true;
  if (b->contains("int8_bit_exact")) {
    EI_ASSIGN_OR_RETURN(cfg.int8BitExact, boolField(*b, "int8_bit_exact"));
  }
  EI_ASSIGN_OR_RETURN(cfg.allowCpuFallback, boolField(*b, "allow_cpu_fallback"));
  EI_ASSIGN_OR_RETURN(cfg.allowNonFiniteWeights, boolField(*b, "allow_non_finite_weights"));
  const auto mtb = b->find("max_tensor_bytes");
  if (mtb == b->end() || !mtb->is_number_integer() || mtb->get<int64_t>() < 1)
    return corrupt("the build options have no positive max_tensor_bytes");
  cfg.maxTensorBytes = mtb->get<int64_t>();
  const auto passes = b->find("passes");
  if (passes == b->end() || !passes->is_object())
    return corrupt("the build options have no passes");
  for (const auto& [key, field] : passFields()) {
    EI_ASSIGN_OR_RETURN(cfg.passes.*field, boolField(*passes, key));
  }
  const auto lp = b->find("layer_precision");
  if (lp == b->end() || !lp->is_object())
    return corrupt("the build options have no layer precisions");
  for (const auto& [layer, p] : lp->items()) {
    EI_ASSIGN_OR_RETURN(cfg.layerPrecision[layer],
                        precisionFrom(p, "the precision of layer '" + layer + "'"));
  }

  const auto tactics = h.find("tactics");
  if (tactics == h.end() || !tactics->is_object())
    return corrupt("the header has no tactics (an empty object for a CPU engine)");
  for (const auto& [layer, id] : tactics->items()) {
    if (!id.is_string() || id.get<std::string>().empty())
      return corrupt("the tactic of layer '" + layer + "' is not a tactic id");
    d.spec.tactics[layer] = id.get<std::string>();
  }
  return d;
}

}  // namespace edgeinfer::builder
