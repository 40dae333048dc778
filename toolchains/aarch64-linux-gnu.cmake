# Cross-compiling EdgeInfer for 64-bit Arm Linux on a Debian/Ubuntu x86-64 host (what CI runs).
#
# Uses Debian's cross compiler (g++-aarch64-linux-gnu) and the arm64 libraries installed through
# multiarch (dpkg --add-architecture arm64; libprotobuf-dev:arm64 ...), which land in
# /usr/lib/aarch64-linux-gnu. `scripts/setup.sh --cross` installs all of it; the arm64 ONNX
# libraries cannot be co-installed through dpkg on Debian 12 (libonnxifi ships an unqualified
# /usr/lib/libonnxifi.so), so setup.sh unpacks them into build/cross-deps/aarch64, which this
# file adds to the search roots (override with -DEDGEINFER_CROSS_DEPS=/path or the environment
# variable of the same name).
#
#   cmake -S . -B build/aarch64 -G Ninja \
#         -DCMAKE_TOOLCHAIN_FILE=toolchains/aarch64-linux-gnu.cmake -DEDGEINFER_WITH_CUDA=OFF
#   cmake --build build/aarch64 && ctest --test-dir build/aarch64     # tests run under qemu
#
# Code generators (protoc) run on the host: they are found outside the find roots, and
# Protobuf_PROTOC_EXECUTABLE points at the host's protoc. Test binaries run through
# CMAKE_CROSSCOMPILING_EMULATOR (qemu-aarch64 with the cross libc as its -L prefix, see the
# end of this file), which ctest and gtest_discover_tests use automatically.
# CUDA is not supported by this file (use toolchains/jetson-aarch64.cmake for a Jetson sysroot).

set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(EDGEINFER_TARGET_TRIPLE aarch64-linux-gnu)

set(CMAKE_C_COMPILER ${EDGEINFER_TARGET_TRIPLE}-gcc)
set(CMAKE_CXX_COMPILER ${EDGEINFER_TARGET_TRIPLE}-g++)
# Debian multiarch: libraries and package configs live in <prefix>/lib/aarch64-linux-gnu.
set(CMAKE_LIBRARY_ARCHITECTURE ${EDGEINFER_TARGET_TRIPLE})

# Private root with the arm64 ONNX libraries (see above). Try-compile projects inherit it.
if(NOT EDGEINFER_CROSS_DEPS)
  if(DEFINED ENV{EDGEINFER_CROSS_DEPS})
    set(EDGEINFER_CROSS_DEPS "$ENV{EDGEINFER_CROSS_DEPS}")
  else()
    get_filename_component(EDGEINFER_CROSS_DEPS "${CMAKE_CURRENT_LIST_DIR}/../build/cross-deps/aarch64"
                           ABSOLUTE)
  endif()
endif()
list(APPEND CMAKE_TRY_COMPILE_PLATFORM_VARIABLES EDGEINFER_CROSS_DEPS)

# Search roots, in order: the private ONNX root, the cross toolchain's own tree, and the host's
# multiarch tree ("/": with CMAKE_LIBRARY_ARCHITECTURE set, /usr/lib/aarch64-linux-gnu is
# searched before /usr/lib, and no x86-64 library sits in either).
set(CMAKE_FIND_ROOT_PATH "${EDGEINFER_CROSS_DEPS}" /usr/${EDGEINFER_TARGET_TRIPLE} /)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)  # protoc & co. run on the host
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)

find_program(EDGEINFER_HOST_PROTOC protoc)
if(EDGEINFER_HOST_PROTOC)
  set(Protobuf_PROTOC_EXECUTABLE "${EDGEINFER_HOST_PROTOC}" CACHE FILEPATH "Host protoc")
endif()

# pkg-config with the target's search path (Debian's pkgconf provides the wrapper), if present.
find_program(EDGEINFER_CROSS_PKG_CONFIG ${EDGEINFER_TARGET_TRIPLE}-pkg-config)
if(EDGEINFER_CROSS_PKG_CONFIG)
  set(PKG_CONFIG_EXECUTABLE "${EDGEINFER_CROSS_PKG_CONFIG}" CACHE FILEPATH "")
endif()

# Run target binaries (tests, gtest discovery) under user-mode QEMU. `-L` makes qemu load the
# cross toolchain's dynamic loader (/usr/aarch64-linux-gnu/lib/ld-linux-aarch64.so.1, package
# libc6-arm64-cross). That loader must get the libc of the same build: once libc6:arm64 is
# installed through multiarch (a dependency of the arm64 libraries), the host's ld.so.cache
# points it at /lib/aarch64-linux-gnu/libc.so.6 instead, and the mismatched pair deadlocks the
# first time a thread is created (std::thread, OpenMP). LD_LIBRARY_PATH puts the cross libc
# (and its libstdc++/libgomp) first; protobuf, ONNX and zlib still come from the multiarch dirs.
find_program(EDGEINFER_QEMU_AARCH64 qemu-aarch64)
if(EDGEINFER_QEMU_AARCH64)
  set(CMAKE_CROSSCOMPILING_EMULATOR
      "${EDGEINFER_QEMU_AARCH64};-L;/usr/${EDGEINFER_TARGET_TRIPLE};-E;LD_LIBRARY_PATH=/usr/${EDGEINFER_TARGET_TRIPLE}/lib")
endif()
