// Runs the ONNX backend tests shipped by Debian's libonnx-testdata against the CPU backend,
// or (--backend cuda) against FP32 GPU engines, with or without the CPU fallback.
//
// Each test is a directory with model.onnx and test_data_set_N/{input_K.pb,output_K.pb}
// (serialized onnx::TensorProto). For every test the model is built with Backend::kCpu, each
// data set's inputs are bound and every output is compared with the expected one: same dtype
// and shape; floating-point values within |got - want| <= atol + rtol * |want| (NaN matches
// NaN, infinities must be equal); integers and bools exactly.
//
// Outcome of a test:
//   PASS           every data set matched
//   UNSUPPORTED    the build failed with kUnsupported, or an input/output has a type we do not
//                  have (sequence/optional/map, double, string, ...): not a failure
//   FAILED         anything else (build error, execution error, mismatch): fails the run
//   KNOWN-FAILING  FAILED, but listed in known_failures.txt: reported, does not fail the run;
//                  a listed test that passes is reported so the entry can be removed
//
//   onnx_conformance [--data-dir DIR] [--suite NAME]... [--filter SUBSTRING]
//                    [--known-failures FILE] [--verbose]
// Exit status: 0 no unexpected failure, 1 unexpected failure(s), 2 bad usage,
// 77 (ctest SKIP_RETURN_CODE) when the test data is not installed.
#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <unistd.h>

#include "edgeinfer/builder.h"
#include "edgeinfer/engine.h"
#include "edgeinfer/logger.h"
#include "edgeinfer/tensor.h"
#include "onnx/onnx_pb.h"
#include "onnx/onnx_tensor.h"

#if defined(__SANITIZE_ADDRESS__)
#define EI_CONFORMANCE_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define EI_CONFORMANCE_ASAN 1
#endif
#endif
#ifdef EI_CONFORMANCE_ASAN
#include <sanitizer/common_interface_defs.h>
#endif

#ifndef EDGEINFER_ONNX_TEST_DATA_DIR
#define EDGEINFER_ONNX_TEST_DATA_DIR "/usr/include/onnx/backend/test/data"
#endif
#ifndef EDGEINFER_KNOWN_FAILURES_FILE
#define EDGEINFER_KNOWN_FAILURES_FILE ""
#endif

namespace fs = std::filesystem;
using edgeinfer::DataType;
using edgeinfer::ErrorCode;
using edgeinfer::Tensor;

namespace {

constexpr int kExitSkip = 77;
const char* const kDefaultSuites[] = {"node", "pytorch-converted", "pytorch-operator", "simple"};

// ---- Tolerances ----------------------------------------------------------------------------

struct Tolerance {
  double rtol;
  double atol;
};

// ONNX's own runner uses rtol 1e-3, atol 1e-7. We loosen atol to 1e-4 because our float32
// kernels accumulate in another order than numpy (which often accumulates in float64 and
// rounds once): for values near zero, a sum of O(100) terms differs by a few float32 ulps of
// the largest term, which no relative bound covers.
constexpr Tolerance kDefaultTolerance{1e-3, 1e-4};

// Per-test overrides. Every entry says why; keep the list short and the bounds tight.
const std::map<std::string, Tolerance>& toleranceOverrides() {
  static const std::map<std::string, Tolerance> table = {
      // DFT of a 10-point signal whose outputs reach |x| ~ 50 and whose imaginary parts should
      // be exactly 0: float32 twiddle factors (sin/cos rounded to 24 bits) leave residues of
      // ~1e-5 * sum|x|. onnxruntime's runner loosens atol for these tests too (to 1e-4).
      {"test_dft", {1e-3, 1e-3}},
      {"test_dft_axis", {1e-3, 1e-3}},
      {"test_dft_inverse", {1e-3, 1e-3}},
      // STFT: the same DFT residues, over 15 overlapping frames.
      {"test_stft", {1e-3, 1e-3}},
      {"test_stft_with_window", {1e-3, 1e-3}},
  };
  return table;
}

// Reduced-precision outputs: expected values were computed in float32/float64 and rounded
// once; ours may round intermediate results, so allow two units in the last place.
Tolerance toleranceFor(const std::string& test, DataType dtype) {
  Tolerance t = kDefaultTolerance;
  auto it = toleranceOverrides().find(test);
  if (it != toleranceOverrides().end()) t = it->second;
  if (dtype == DataType::kFloat16) t.rtol = std::max(t.rtol, 2.0 * 9.765625e-4);  // 2^-10
  if (dtype == DataType::kBFloat16) t.rtol = std::max(t.rtol, 2.0 * 7.8125e-3);   // 2^-7
  return t;
}

// ---- Crash reporting -------------------------------------------------------------------------
// A kernel that crashes takes the whole suite with it; at least say which test it was.

char g_currentTest[512] = "";

void announceCrash() {
  if (g_currentTest[0] == '\0') return;
  const char prefix[] = "\nONNX conformance: crashed while running test ";
  ssize_t ignored = write(STDERR_FILENO, prefix, sizeof(prefix) - 1);
  ignored = write(STDERR_FILENO, g_currentTest, strlen(g_currentTest));
  ignored = write(STDERR_FILENO, "\n", 1);
  (void)ignored;
}

#ifdef EI_CONFORMANCE_ASAN
void installCrashReporter() {
  __sanitizer_set_death_callback(announceCrash);
}
#else
extern "C" void onFatalSignal(int sig) {
  announceCrash();
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}
void installCrashReporter() {
  for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) std::signal(sig, onFatalSignal);
}
#endif

// ---- Logging -----------------------------------------------------------------------------------

// The SDK's warnings (one per unsupported model) would drown the report; keep them unless
// --verbose, and show them with the test they belong to only when it fails.
class CapturingLogger : public edgeinfer::ILogger {
 public:
  void log(edgeinfer::Severity severity, const char* message) noexcept override {
    try {
      if (echo_) std::cerr << "  [" << edgeinfer::severityName(severity) << "] " << message << "\n";
      captured_ += message;
      captured_ += '\n';
    } catch (...) {
    }
  }
  void setEcho(bool echo) { echo_ = echo; }
  std::string take() { return std::exchange(captured_, {}); }

 private:
  bool echo_ = false;
  std::string captured_;
};

// ---- Options ---------------------------------------------------------------------------------

struct Options {
  std::string dataDir = EDGEINFER_ONNX_TEST_DATA_DIR;
  std::vector<std::string> suites;
  std::string filter;
  std::string knownFailuresFile = EDGEINFER_KNOWN_FAILURES_FILE;
  bool verbose = false;
  edgeinfer::Backend backend = edgeinfer::Backend::kCpu;
  bool gpuOnly = false;         // --backend cuda: no CPU fallback (its tests count unsupported)
  std::string timingCachePath;  // --backend cuda: shared by every test of the run
};

Options g_options;

void usage(std::ostream& os) {
  os << "usage: onnx_conformance [--data-dir DIR] [--suite NAME]... [--filter SUBSTRING]\n"
        "                        [--known-failures FILE] [--verbose]\n"
        "                        [--backend cpu|cuda [--gpu-only] [--timing-cache FILE]]\n"
        "  --data-dir DIR        ONNX backend test data (default " EDGEINFER_ONNX_TEST_DATA_DIR
        ")\n"
        "  --suite NAME          node, pytorch-converted, pytorch-operator, simple (repeatable;\n"
        "                        default: all four)\n"
        "  --filter SUBSTRING    only tests whose name contains SUBSTRING\n"
        "  --known-failures FILE tests expected to fail, one name per line ('name # reason')\n"
        "  --verbose             print every test and the SDK's log\n"
        "  --backend cpu|cuda    build each model for this backend (default cpu); cuda builds\n"
        "                        FP32 GPU engines (quick timing) and needs a GPU\n"
        "  --gpu-only            cuda: no CPU fallback; a model with a layer no GPU kernel\n"
        "                        runs counts as unsupported (the reason names the layer)\n"
        "  --timing-cache FILE   cuda: the timing cache the builds share\n";
}

bool parseArgs(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&](std::string* out) {
      if (i + 1 >= argc) {
        std::cerr << "onnx_conformance: " << a << " needs a value\n";
        return false;
      }
      *out = argv[++i];
      return true;
    };
    std::string v;
    if (a == "--data-dir") {
      if (!value(&o->dataDir)) return false;
    } else if (a == "--suite") {
      if (!value(&v)) return false;
      o->suites.push_back(v);
    } else if (a == "--filter") {
      if (!value(&o->filter)) return false;
    } else if (a == "--known-failures") {
      if (!value(&o->knownFailuresFile)) return false;
    } else if (a == "--backend") {
      if (!value(&v)) return false;
      if (v == "cpu") {
        o->backend = edgeinfer::Backend::kCpu;
      } else if (v == "cuda") {
        o->backend = edgeinfer::Backend::kCuda;
      } else {
        std::cerr << "onnx_conformance: --backend takes cpu or cuda, not '" << v << "'\n";
        return false;
      }
    } else if (a == "--gpu-only") {
      o->gpuOnly = true;
    } else if (a == "--timing-cache") {
      if (!value(&o->timingCachePath)) return false;
    } else if (a == "--verbose" || a == "-v") {
      o->verbose = true;
    } else if (a == "--help" || a == "-h") {
      usage(std::cout);
      std::exit(0);
    } else {
      std::cerr << "onnx_conformance: unknown argument '" << a << "'\n";
      usage(std::cerr);
      return false;
    }
  }
  if (o->suites.empty()) o->suites.assign(std::begin(kDefaultSuites), std::end(kDefaultSuites));
  return true;
}

// known_failures.txt: "test_name  # reason" per line; '#' lines and blank lines ignored.
// A name may be qualified by its suite ("node/test_foo").
std::map<std::string, std::string> loadKnownFailures(const std::string& path) {
  std::map<std::string, std::string> known;
  if (path.empty()) return known;
  std::ifstream in(path);
  if (!in) {
    std::cerr << "onnx_conformance: warning: cannot read known-failures file " << path << "\n";
    return known;
  }
  std::string line;
  while (std::getline(in, line)) {
    std::string reason;
    auto hash = line.find('#');
    if (hash != std::string::npos) {
      reason = line.substr(hash + 1);
      line.resize(hash);
    }
    auto trim = [](std::string s) {
      const char* ws = " \t\r\n";
      auto b = s.find_first_not_of(ws);
      if (b == std::string::npos) return std::string();
      return s.substr(b, s.find_last_not_of(ws) - b + 1);
    };
    line = trim(line);
    if (!line.empty()) known[line] = trim(reason);
  }
  return known;
}

// ---- One test ------------------------------------------------------------------------------

enum class Outcome { kPass, kFail, kUnsupported };

struct Result {
  Outcome outcome = Outcome::kPass;
  std::string reason;
};

Result fail(std::string why) {
  return {Outcome::kFail, std::move(why)};
}
Result unsupported(std::string why) {
  return {Outcome::kUnsupported, std::move(why)};
}

bool readProto(const fs::path& path, google::protobuf::MessageLite* msg) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return msg->ParseFromString(bytes);
}

// Why a graph input/output cannot be represented as one of our tensors ("" if it can).
std::string unsupportedValueType(const onnx::ValueInfoProto& vi) {
  if (!vi.type().has_tensor_type()) {
    switch (vi.type().value_case()) {
      case onnx::TypeProto::kSequenceType:
        return "'" + vi.name() + "' is a sequence";
      case onnx::TypeProto::kMapType:
        return "'" + vi.name() + "' is a map";
      case onnx::TypeProto::kOptionalType:
        return "'" + vi.name() + "' is an optional";
      case onnx::TypeProto::kSparseTensorType:
        return "'" + vi.name() + "' is a sparse tensor";
      default:
        return "'" + vi.name() + "' has no tensor type";
    }
  }
  int et = vi.type().tensor_type().elem_type();
  if (edgeinfer::onnx_import::dataTypeFromOnnx(et) == DataType::kUndefined)
    return "'" + vi.name() + "' has element type " + edgeinfer::onnx_import::onnxTypeName(et);
  return "";
}

std::string formatValue(const Tensor& t, int64_t i) {
  std::ostringstream os;
  if (isFloatingPoint(t.dtype())) {
    os.precision(9);
    os << t.getAsDouble(i);
  } else {
    os << t.getAsInt64(i);
  }
  return os.str();
}

// Compares one output; returns "" when it matches, else a description of the mismatch.
std::string compare(const std::string& test, const std::string& name, const Tensor& got,
                    const Tensor& want) {
  if (got.dtype() != want.dtype())
    return "output '" + name + "': dtype " + dataTypeName(got.dtype()) + ", expected " +
           dataTypeName(want.dtype());
  if (got.shape() != want.shape())
    return "output '" + name + "': shape " + got.shape().toString() + ", expected " +
           want.shape().toString();
  if (!got.onHost()) return "output '" + name + "' is not a host tensor";
  const int64_t n = want.numel();
  int64_t bad = 0;
  int64_t firstBad = -1;
  double maxErr = 0;
  std::ostringstream detail;
  if (isFloatingPoint(want.dtype())) {
    const Tolerance tol = toleranceFor(test, want.dtype());
    for (int64_t i = 0; i < n; ++i) {
      double a = got.getAsDouble(i), b = want.getAsDouble(i);
      bool ok;
      if (std::isnan(b) || std::isnan(a)) {
        ok = std::isnan(a) && std::isnan(b);
      } else if (std::isinf(b) || std::isinf(a)) {
        ok = a == b;
      } else {
        double err = std::fabs(a - b);
        ok = err <= tol.atol + tol.rtol * std::fabs(b);
        if (!ok) maxErr = std::max(maxErr, err);
      }
      if (!ok && bad++ == 0) firstBad = i;
    }
    if (bad)
      detail << ", max |err| " << maxErr << " (rtol " << tol.rtol << ", atol " << tol.atol << ")";
  } else {
    for (int64_t i = 0; i < n; ++i)
      if (got.getAsInt64(i) != want.getAsInt64(i) && bad++ == 0) firstBad = i;
  }
  if (!bad) return "";
  std::ostringstream os;
  os << "output '" << name << "' " << want.describe() << ": " << bad << " of " << n
     << " values differ; first at flat index " << firstBad << ": got " << formatValue(got, firstBad)
     << ", expected " << formatValue(want, firstBad) << detail.str();
  return os.str();
}

// Sorted test_data_set_N directories (numeric order).
std::vector<fs::path> dataSets(const fs::path& testDir) {
  std::vector<std::pair<long, fs::path>> sets;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(testDir, ec)) {
    const std::string n = e.path().filename().string();
    if (e.is_directory() && n.rfind("test_data_set_", 0) == 0)
      sets.emplace_back(std::strtol(n.c_str() + 14, nullptr, 10), e.path());
  }
  std::sort(sets.begin(), sets.end());
  std::vector<fs::path> out;
  for (auto& s : sets) out.push_back(s.second);
  return out;
}

// prefix_0.pb, prefix_1.pb, ... until one is missing.
std::vector<fs::path> numberedFiles(const fs::path& dir, const std::string& prefix) {
  std::vector<fs::path> out;
  for (int k = 0;; ++k) {
    fs::path p = dir / (prefix + "_" + std::to_string(k) + ".pb");
    if (!fs::exists(p)) break;
    out.push_back(p);
  }
  return out;
}

// Loads a TensorProto file; kUnsupported types become UNSUPPORTED, other errors FAILED.
bool loadTensor(const fs::path& file, Tensor* t, std::string* name, Result* err) {
  onnx::TensorProto proto;
  if (!readProto(file, &proto)) {
    *err = fail("cannot parse " + file.filename().string() + " as a TensorProto");
    return false;
  }
  auto loaded = edgeinfer::onnx_import::tensorFromProto(proto, file.parent_path().string());
  if (!loaded.ok()) {
    std::string why = file.filename().string() + ": " + loaded.status().toString();
    *err = loaded.status().code() == ErrorCode::kUnsupported ? unsupported(why) : fail(why);
    return false;
  }
  *t = std::move(*loaded);
  *name = proto.name();
  return true;
}

const edgeinfer::TensorDesc* findDesc(const std::vector<edgeinfer::TensorDesc>& descs,
                                      const std::string& name) {
  for (const auto& d : descs)
    if (d.name == name) return &d;
  return nullptr;
}

Result runTest(const fs::path& testDir, const std::string& test) {
  const fs::path modelPath = testDir / "model.onnx";
  onnx::ModelProto model;
  if (!readProto(modelPath, &model)) return fail("cannot parse model.onnx");

  // Types we cannot even represent are UNSUPPORTED before the builder sees them.
  std::set<std::string> initializers;
  for (const auto& init : model.graph().initializer()) initializers.insert(init.name());
  for (const auto& in : model.graph().input()) {
    if (initializers.count(in.name())) continue;
    std::string why = unsupportedValueType(in);
    if (!why.empty()) return unsupported("input " + why);
  }
  for (const auto& out : model.graph().output()) {
    std::string why = unsupportedValueType(out);
    if (!why.empty()) return unsupported("output " + why);
  }

  edgeinfer::BuilderConfig config;
  config.backend = g_options.backend;
  if (config.backend == edgeinfer::Backend::kCuda) {
    config.precision = edgeinfer::Precision::kFp32;
    config.allowCpuFallback = !g_options.gpuOnly;
    config.timingCachePath = g_options.timingCachePath;
    config.timing.warmup = 1;
    config.timing.iterations = 1;
    config.timing.repeats = 1;
  }
  auto engine = edgeinfer::Builder::buildFromFile(modelPath.string(), config);
  if (!engine.ok()) {
    std::string why = "build: " + engine.status().toString();
    return engine.status().code() == ErrorCode::kUnsupported ? unsupported(why) : fail(why);
  }
  const auto& inputs = (*engine)->inputs();
  const auto& outputs = (*engine)->outputs();
  auto ctx = (*engine)->createExecutionContext();
  if (!ctx.ok()) return fail("createExecutionContext: " + ctx.status().toString());

  const auto sets = dataSets(testDir);
  if (sets.empty()) return fail("no test_data_set_N directory");
  for (const auto& set : sets) {
    const std::string where = set.filename().string() + ": ";
    // Inputs: bound by the name in the file when set (it is the graph input's name), else
    // by position among the engine's inputs. They must stay alive until execute().
    std::vector<Tensor> bound;
    const auto inputFiles = numberedFiles(set, "input");
    for (size_t k = 0; k < inputFiles.size(); ++k) {
      Tensor t;
      std::string name;
      Result err;
      if (!loadTensor(inputFiles[k], &t, &name, &err)) {
        err.reason = where + err.reason;
        return err;
      }
      if (name.empty()) {
        if (k >= inputs.size())
          return fail(where + "input_" + std::to_string(k) +
                      ".pb has no name and the engine has only " + std::to_string(inputs.size()) +
                      " inputs");
        name = inputs[k].name;
      } else if (!findDesc(inputs, name)) {
        return fail(where + "the engine has no input '" + name + "'");
      }
      auto st = (*ctx)->setInput(name, t);
      if (!st.ok())
        return fail(where + "setInput('" + name + "', " + t.describe() + "): " + st.toString());
      bound.push_back(std::move(t));
    }
    auto st = (*ctx)->execute();
    if (!st.ok()) return fail(where + "execute: " + st.toString());

    const auto outputFiles = numberedFiles(set, "output");
    if (outputFiles.empty()) return fail(where + "no output_K.pb");
    for (size_t k = 0; k < outputFiles.size(); ++k) {
      Tensor want;
      std::string name;
      Result err;
      if (!loadTensor(outputFiles[k], &want, &name, &err)) {
        err.reason = where + err.reason;
        return err;
      }
      if (name.empty()) {
        if (k >= outputs.size())
          return fail(where + "output_" + std::to_string(k) +
                      ".pb has no name and the engine has only " + std::to_string(outputs.size()) +
                      " outputs");
        name = outputs[k].name;
      }
      auto got = (*ctx)->getOutput(name);
      if (!got.ok()) return fail(where + "getOutput('" + name + "'): " + got.status().toString());
      std::string mismatch = compare(test, name, *got, want);
      if (!mismatch.empty()) return fail(where + mismatch);
    }
  }
  return {};
}

// ---- Suites ---------------------------------------------------------------------------------

struct Counts {
  int passed = 0, failed = 0, unsupported = 0, knownFailing = 0, nowPassing = 0;
  void add(const Counts& o) {
    passed += o.passed;
    failed += o.failed;
    unsupported += o.unsupported;
    knownFailing += o.knownFailing;
    nowPassing += o.nowPassing;
  }
};

void printCounts(const std::string& prefix, const Counts& c) {
  std::cout << prefix << "ONNX conformance: " << c.passed << " passed, " << c.failed << " failed, "
            << c.unsupported << " unsupported";
  if (c.knownFailing) std::cout << ", " << c.knownFailing << " known-failing";
  if (c.nowPassing) std::cout << ", " << c.nowPassing << " known-failing now passing";
  std::cout << "\n";
}

Counts runSuite(const Options& opt, const std::string& suite,
                const std::map<std::string, std::string>& known, CapturingLogger& logger) {
  Counts c;
  std::vector<fs::path> tests;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(fs::path(opt.dataDir) / suite, ec))
    if (e.is_directory() && fs::exists(e.path() / "model.onnx")) tests.push_back(e.path());
  std::sort(tests.begin(), tests.end());

  for (const auto& dir : tests) {
    const std::string test = dir.filename().string();
    if (!opt.filter.empty() && test.find(opt.filter) == std::string::npos) continue;
    const std::string qualified = suite + "/" + test;
    std::snprintf(g_currentTest, sizeof(g_currentTest), "%s", qualified.c_str());
    if (opt.verbose) std::cout << "[ RUN  ] " << qualified << std::endl;

    logger.take();
    Result r = runTest(dir, test);
    std::string log = logger.take();
    auto kf = known.find(test);
    if (kf == known.end()) kf = known.find(qualified);
    const bool isKnown = kf != known.end();

    switch (r.outcome) {
      case Outcome::kPass:
        ++c.passed;
        if (isKnown) {
          ++c.nowPassing;
          std::cout << "[ NOW PASSING ] " << qualified
                    << ": listed in known_failures.txt but passes: remove the entry\n";
        } else if (opt.verbose) {
          std::cout << "[ PASS ] " << qualified << "\n";
        }
        break;
      case Outcome::kUnsupported:
        ++c.unsupported;
        if (opt.verbose) std::cout << "[ UNSUPPORTED ] " << qualified << ": " << r.reason << "\n";
        break;
      case Outcome::kFail:
        if (isKnown) {
          ++c.knownFailing;
          std::cout << "[ KNOWN-FAILING ] " << qualified << " (" << kf->second << "): " << r.reason
                    << "\n";
        } else {
          ++c.failed;
          std::cout << "[ FAILED ] " << qualified << ": " << r.reason << "\n";
          if (!log.empty() && !opt.verbose) std::cout << "  SDK log:\n" << log;
        }
        break;
    }
    std::cout.flush();
  }
  g_currentTest[0] = '\0';
  return c;
}

}  // namespace

int main(int argc, char** argv) {
  Options& opt = g_options;
  if (!parseArgs(argc, argv, &opt)) return 2;
  if (opt.backend == edgeinfer::Backend::kCuda && opt.timingCachePath.empty())
    opt.timingCachePath =
        (fs::temp_directory_path() / ("onnx_conformance_" + std::to_string(::getpid()) + ".cache"))
            .string();
  installCrashReporter();

  if (!fs::is_directory(opt.dataDir)) {
    std::cout << "ONNX conformance: SKIPPED: test data not found at " << opt.dataDir
              << " (install Debian's libonnx-testdata: scripts/setup.sh)\n";
    return kExitSkip;
  }
  const auto known = loadKnownFailures(opt.knownFailuresFile);

  CapturingLogger logger;
  logger.setEcho(opt.verbose);
  edgeinfer::setLogger(&logger);

  Counts total;
  int suitesRun = 0;
  for (const auto& suite : opt.suites) {
    if (!fs::is_directory(fs::path(opt.dataDir) / suite)) {
      std::cout << "ONNX conformance: SKIPPED suite '" << suite << "': no directory "
                << (fs::path(opt.dataDir) / suite).string() << "\n";
      continue;
    }
    ++suitesRun;
    Counts c = runSuite(opt, suite, known, logger);
    printCounts("[" + suite + "] ", c);
    total.add(c);
  }
  edgeinfer::setLogger(nullptr);
  if (suitesRun == 0) return kExitSkip;
  printCounts("", total);
  return total.failed > 0 ? 1 : 0;
}
