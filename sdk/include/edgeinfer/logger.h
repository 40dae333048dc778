// A logger the embedding application owns (like TensorRT's ILogger). The SDK never
// prints on its own: everything goes through the installed logger, which by default
// writes warnings and errors to stderr.
#pragma once

#include <string>

namespace edgeinfer {

enum class Severity : int { kError = 0, kWarning = 1, kInfo = 2, kVerbose = 3 };

const char* severityName(Severity s);

class ILogger {
 public:
  virtual ~ILogger() = default;
  /// Called from any thread; must not throw.
  virtual void log(Severity severity, const char* message) noexcept = 0;
};

/// Installs `logger` (nullptr restores the default stderr logger). The caller keeps it alive.
void setLogger(ILogger* logger);
ILogger& getLogger();

/// Messages above this severity are dropped before formatting (default kWarning, or the
/// value of EDGEINFER_LOG_LEVEL: error|warning|info|verbose).
void setLogLevel(Severity maxSeverity);
Severity getLogLevel();

/// Logs through the installed logger if `severity` passes the level.
void log(Severity severity, const std::string& message);

}  // namespace edgeinfer
