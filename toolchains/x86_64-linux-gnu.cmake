# Native x86-64 Linux build with GCC, optionally against a sysroot (a root filesystem of an
# older or pinned distribution, so the binaries run there: the glibc in the sysroot decides).
#
#   cmake -S . -B build/x86_64 -G Ninja -DCMAKE_TOOLCHAIN_FILE=toolchains/x86_64-linux-gnu.cmake
#   cmake -S . -B build/x86_64-deb12 -G Ninja -DCMAKE_TOOLCHAIN_FILE=toolchains/x86_64-linux-gnu.cmake \
#         -DEDGEINFER_SYSROOT=/opt/sysroots/debian12-amd64
#
# Settings (cache variables, or environment variables of the same name):
#   EDGEINFER_SYSROOT  root filesystem with /usr/lib/x86_64-linux-gnu holding the dependencies
#                      (libprotobuf-dev, libonnx-dev, zlib1g-dev, libgtest-dev ...); empty (the
#                      default) builds against this machine. -DCMAKE_SYSROOT=... works too.
#   EDGEINFER_CC / EDGEINFER_CXX  compilers (default gcc / g++; x86_64-linux-gnu-gcc works too).
# With a sysroot, libraries and headers are searched only there, while programs (protoc, nvcc)
# are the host's: protoc must match the sysroot's libprotobuf version. CUDA is detected as usual
# (CMakeLists.txt); with a sysroot the CUDA host compiler is the same g++.

# CMAKE_SYSTEM_NAME is deliberately not set: that would mark the build as cross-compiling
# (no try_run, tests treated as foreign), though its binaries run on this machine.
if(NOT CMAKE_HOST_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64|amd64)$")
  message(FATAL_ERROR "x86_64-linux-gnu.cmake is for x86-64 hosts; this is ${CMAKE_HOST_SYSTEM_PROCESSOR}")
endif()

foreach(_var EDGEINFER_SYSROOT EDGEINFER_CC EDGEINFER_CXX)
  if(NOT DEFINED ${_var} AND DEFINED ENV{${_var}})
    set(${_var} "$ENV{${_var}}")
  endif()
endforeach()
if(NOT EDGEINFER_SYSROOT AND CMAKE_SYSROOT)
  set(EDGEINFER_SYSROOT "${CMAKE_SYSROOT}")
endif()
if(NOT EDGEINFER_CC)
  set(EDGEINFER_CC gcc)
endif()
if(NOT EDGEINFER_CXX)
  set(EDGEINFER_CXX g++)
endif()
list(APPEND CMAKE_TRY_COMPILE_PLATFORM_VARIABLES EDGEINFER_SYSROOT EDGEINFER_CC EDGEINFER_CXX)

set(CMAKE_C_COMPILER ${EDGEINFER_CC})
set(CMAKE_CXX_COMPILER ${EDGEINFER_CXX})
set(CMAKE_LIBRARY_ARCHITECTURE x86_64-linux-gnu)

if(EDGEINFER_SYSROOT)
  if(NOT IS_DIRECTORY "${EDGEINFER_SYSROOT}/usr/lib/x86_64-linux-gnu")
    message(FATAL_ERROR "x86_64-linux-gnu.cmake: ${EDGEINFER_SYSROOT} has no usr/lib/x86_64-linux-gnu")
  endif()
  set(CMAKE_SYSROOT "${EDGEINFER_SYSROOT}")
  set(CMAKE_FIND_ROOT_PATH "${EDGEINFER_SYSROOT}")
  set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
  set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
  set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
  set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
  set(CMAKE_CUDA_HOST_COMPILER ${EDGEINFER_CXX})
  # Binaries are built for the same CPU: tests run directly (not cross-compiling for ctest);
  # they load the sysroot's libraries only if those are ABI-compatible with this machine.
endif()
