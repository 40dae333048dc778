#include <sys/stat.h>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <random>

#include "cli.h"
#include "core/npy.h"
#include "edgeinfer/engine.h"

namespace edgeinfer::cli {
namespace {

const char* kRunHelp = R"(usage: edgeinfer run MODEL.onnx|ENGINE [options]

  --input NAME=FILE.npy     bind an input from a .npy file (repeatable)
  --inputs DIR              bind every input from DIR/<input name>.npy
  --outputs DIR             write every output as DIR/<output name>.npy
  --dim NAME=VALUE          value of a named dynamic dimension for random inputs (default 1)
  --seed N                  seed of the random inputs (default 0)
  --iterations N            timed runs (default 1)
  --warmup N                untimed runs first (default 0)
)";

bool isEngineFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  char magic[8] = {};
  f.read(magic, 8);
  return f && std::memcmp(magic, "EIENGINE", 8) == 0;
}

/// A file name for a tensor name (graph names may contain '/' or ':').
std::string safeName(std::string n) {
  for (char& c : n)
    if (c == '/' || c == '\\' || c == ':' || c == ' ') c = '_';
  return n;
}

Expected<Tensor> randomInput(const TensorDesc& d, const Args& a, std::mt19937& rng) {
  std::vector<int64_t> dims = d.shape.dims();
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] >= 0) continue;
    dims[i] = 1;
    for (const auto& kv : a.all("dim")) {
      const auto eq = kv.find('=');
      if (eq != std::string::npos && i < d.dimNames.size() && kv.substr(0, eq) == d.dimNames[i])
        dims[i] = std::atoll(kv.c_str() + eq + 1);
    }
  }
  EI_ASSIGN_OR_RETURN(Tensor t, Tensor::create(d.dtype, Shape(dims)));
  std::uniform_real_distribution<float> uni(0.f, 1.f);
  if (d.dtype == DataType::kFloat32) {
    for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = uni(rng);
  } else if (d.dtype == DataType::kUInt8) {
    for (int64_t i = 0; i < t.numel(); ++i)
      t.data<uint8_t>()[i] = static_cast<uint8_t>(rng() & 0xff);
  }  // other types stay zero: random indices or flags are rarely meaningful
  return t;
}

void printSummary(const std::string& name, const Tensor& t) {
  std::cout << "  " << name << ": " << t.describe();
  const int64_t n = t.numel();
  if (n > 0) {
    double mn = t.getAsDouble(0), mx = mn, sum = 0;
    int64_t nonFinite = 0;
    for (int64_t i = 0; i < n; ++i) {
      const double v = t.getAsDouble(i);
      if (!std::isfinite(v)) {
        ++nonFinite;
        continue;
      }
      mn = std::min(mn, v);
      mx = std::max(mx, v);
      sum += v;
    }
    std::cout << std::setprecision(6) << "  min " << mn << "  max " << mx << "  mean " << sum / n;
    if (nonFinite) std::cout << "  (" << nonFinite << " NaN/Inf)";
    std::cout << "\n    first:";
    for (int64_t i = 0; i < std::min<int64_t>(n, 8); ++i) std::cout << " " << t.getAsDouble(i);
  }
  std::cout << "\n";
}

}  // namespace

int cmdRun(const Args& a) {
  if (a.has("help") || a.positional.size() != 1) {
    std::cout << kRunHelp << "\n" << kBuilderOptionsHelp;
    return a.has("help") ? 0 : 2;
  }
  const std::string path = a.positional[0];
  Expected<std::unique_ptr<Engine>> engine = Status(ErrorCode::kInternal, "unset");
  const auto t0 = std::chrono::steady_clock::now();
  if (isEngineFile(path)) {
    engine = Engine::load(path);
  } else {
    auto cfg = builderConfigFrom(a);
    if (!cfg.ok()) return fail(cfg.status());
    engine = Builder::buildFromFile(path, *cfg);
  }
  if (!engine.ok()) return fail(engine.status());
  const double loadMs =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  auto ctx = (*engine)->createExecutionContext();
  if (!ctx.ok()) return fail(ctx.status());

  std::mt19937 rng(static_cast<unsigned>(std::atoi(a.get("seed", "0").c_str())));
  std::map<std::string, std::string> files;
  for (const auto& kv : a.all("input")) {
    const auto eq = kv.find('=');
    if (eq == std::string::npos)
      return fail(Status(ErrorCode::kInvalidArgument, "--input needs NAME=FILE.npy"));
    files[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  for (const auto& [name, file] : files) {
    bool known = false;
    for (const auto& d : (*engine)->inputs()) known |= d.name == name;
    if (!known)
      return fail(Status(ErrorCode::kNotFound,
                         "--input names '" + name + "', which is not an input of the model"));
  }
  std::cout << "inputs:\n";
  for (const auto& d : (*engine)->inputs()) {
    Expected<Tensor> t = Status(ErrorCode::kInternal, "unset");
    if (files.count(d.name)) {
      t = readNpy(files[d.name]);
    } else if (a.has("inputs")) {
      t = readNpy(a.get("inputs") + "/" + safeName(d.name) + ".npy");
    } else {
      t = randomInput(d, a, rng);
    }
    if (!t.ok()) return fail(t.status().withContext("input '" + d.name + "'"));
    printSummary(d.name, *t);
    Status s = (*ctx)->setInput(d.name, *t);
    if (!s.ok()) return fail(s);
  }
  const int warmup = std::max(0, std::atoi(a.get("warmup", "0").c_str()));
  const int iters = std::max(1, std::atoi(a.get("iterations", "1").c_str()));
  for (int i = 0; i < warmup; ++i) {
    Status s = (*ctx)->execute();
    if (!s.ok()) return fail(s);
  }
  std::vector<double> ms;
  for (int i = 0; i < iters; ++i) {
    const auto s0 = std::chrono::steady_clock::now();
    Status s = (*ctx)->execute();
    if (!s.ok()) return fail(s);
    ms.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - s0).count());
  }
  std::cout << "outputs:\n";
  if (a.has("outputs")) ::mkdir(a.get("outputs").c_str(), 0755);
  for (const auto& d : (*engine)->outputs()) {
    auto t = (*ctx)->getOutput(d.name);
    if (!t.ok()) return fail(t.status());
    printSummary(d.name, *t);
    if (a.has("outputs")) {
      const std::string file = a.get("outputs") + "/" + safeName(d.name) + ".npy";
      Status s = writeNpy(file, *t);
      if (!s.ok()) return fail(s);
      std::cout << "    written to " << file << "\n";
    }
  }
  const ContextStats st = (*ctx)->stats();
  if (st.activationArenaBytes > 0)
    std::cout << "memory: activations " << st.activationArenaBytes / 1024
              << " KiB after liveness planning (" << st.activationNaiveBytes / 1024
              << " KiB without reuse)\n";
  std::sort(ms.begin(), ms.end());
  double mean = 0;
  for (double v : ms) mean += v;
  mean /= static_cast<double>(ms.size());
  std::cout << std::fixed << std::setprecision(3) << "timing: build/load " << loadMs << " ms; "
            << iters << " run(s): mean " << mean << " ms, median " << ms[ms.size() / 2]
            << " ms, min " << ms.front() << " ms, max " << ms.back() << " ms (backend "
            << backendName((*engine)->info().backend) << ")\n";
  return 0;
}

}  // namespace edgeinfer::cli
