# Cross-compiling EdgeInfer, with its CUDA backend, for NVIDIA Jetson boards (aarch64, L4T / JetPack)
# from an x86-64 host, against a copy of the board's root filesystem (the sysroot).
#
#   cmake -S . -B build/jetson-orin -G Ninja \
#         -DCMAKE_TOOLCHAIN_FILE=toolchains/jetson-aarch64.cmake \
#         -DEDGEINFER_SYSROOT=/opt/jetson/orin-rootfs -DJETSON_TARGET=orin
#   cmake --build build/jetson-orin
#
# Settings (cache variables, or environment variables of the same name):
#   EDGEINFER_SYSROOT   the board's root filesystem (needs /usr/lib/aarch64-linux-gnu with
#                       libprotobuf, libonnx, zlib, libgomp and their headers, e.g. from
#                       `rsync -a jetson:/{usr,lib} rootfs/` or NVIDIA's L4T sample rootfs with
#                       libprotobuf-dev libonnx-dev installed). -DCMAKE_SYSROOT=... works too.
#   JETSON_TARGET       orin (default): SASS for sm_87 (Jetson AGX Orin / Orin NX / Orin Nano)
#                       thor:           SASS for sm_110 (Jetson AGX Thor; needs CUDA >= 13.0)
#                       Each also gets PTX for its newest architecture so a later GPU can JIT.
#                       Set CMAKE_CUDA_ARCHITECTURES yourself to override.
#   EDGEINFER_CUDA_ROOT the x86-64 CUDA toolkit whose nvcc cross-compiles (default
#                       /usr/local/cuda). Its aarch64 target files (cuda-cross-aarch64 /
#                       cuda-cross-sbsa package: /usr/local/cuda/targets/aarch64-linux) are used
#                       when present, else the sysroot's own /usr/local/cuda.
#   EDGEINFER_CROSS_PREFIX  compiler prefix (default aarch64-linux-gnu-; the host compiler must
#                       be a GCC the target's CUDA accepts and glibc not newer than the board's).
#
# Tests cannot run on the host unless qemu-aarch64 is installed (then they run through it, but
# CUDA tests need the board). Copy build/.../tests to the board and run ctest there instead.

set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)

macro(_edgeinfer_setting var default)
  if(NOT DEFINED ${var} OR "${${var}}" STREQUAL "")
    if(DEFINED ENV{${var}} AND NOT "$ENV{${var}}" STREQUAL "")
      set(${var} "$ENV{${var}}")
    else()
      set(${var} "${default}")
    endif()
  endif()
endmacro()

_edgeinfer_setting(EDGEINFER_SYSROOT "${CMAKE_SYSROOT}")
_edgeinfer_setting(JETSON_TARGET orin)
_edgeinfer_setting(EDGEINFER_CUDA_ROOT /usr/local/cuda)
_edgeinfer_setting(EDGEINFER_CROSS_PREFIX aarch64-linux-gnu-)
# try_compile() projects re-read this file; pass the settings on.
list(APPEND CMAKE_TRY_COMPILE_PLATFORM_VARIABLES EDGEINFER_SYSROOT JETSON_TARGET
     EDGEINFER_CUDA_ROOT EDGEINFER_CROSS_PREFIX)

if(NOT EDGEINFER_SYSROOT)
  message(FATAL_ERROR "jetson-aarch64.cmake: set EDGEINFER_SYSROOT (or CMAKE_SYSROOT) to the "
                      "Jetson root filesystem, e.g. -DEDGEINFER_SYSROOT=/opt/jetson/rootfs")
endif()
if(NOT IS_DIRECTORY "${EDGEINFER_SYSROOT}/usr/lib/aarch64-linux-gnu")
  message(FATAL_ERROR "jetson-aarch64.cmake: ${EDGEINFER_SYSROOT} does not look like an aarch64 "
                      "root filesystem (no usr/lib/aarch64-linux-gnu)")
endif()
set(CMAKE_SYSROOT "${EDGEINFER_SYSROOT}")

set(CMAKE_C_COMPILER ${EDGEINFER_CROSS_PREFIX}gcc)
set(CMAKE_CXX_COMPILER ${EDGEINFER_CROSS_PREFIX}g++)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)

# Everything is looked up in the sysroot except programs (nvcc, protoc), which run here.
set(CMAKE_FIND_ROOT_PATH "${EDGEINFER_SYSROOT}")
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)

find_program(EDGEINFER_HOST_PROTOC protoc)
if(EDGEINFER_HOST_PROTOC)
  # Must be the same protobuf version as the sysroot's libprotobuf.
  set(Protobuf_PROTOC_EXECUTABLE "${EDGEINFER_HOST_PROTOC}" CACHE FILEPATH "Host protoc")
endif()

# ---- CUDA -----------------------------------------------------------------------------------
if(JETSON_TARGET STREQUAL "orin")
  set(_edgeinfer_jetson_archs "87")
elseif(JETSON_TARGET STREQUAL "thor")
  set(_edgeinfer_jetson_archs "110")
else()
  message(FATAL_ERROR "jetson-aarch64.cmake: JETSON_TARGET must be orin or thor, not '${JETSON_TARGET}'")
endif()
if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
  # "87" = SASS + PTX for sm_87 (CMake's plain number means both): the newest, and only, one.
  set(CMAKE_CUDA_ARCHITECTURES "${_edgeinfer_jetson_archs}" CACHE STRING
      "CUDA architectures for JETSON_TARGET=${JETSON_TARGET}")
endif()

get_property(_edgeinfer_in_try_compile GLOBAL PROPERTY IN_TRY_COMPILE)
if(EXISTS "${EDGEINFER_CUDA_ROOT}/bin/nvcc")
  set(CMAKE_CUDA_COMPILER "${EDGEINFER_CUDA_ROOT}/bin/nvcc")
  set(CMAKE_CUDA_HOST_COMPILER "${EDGEINFER_CROSS_PREFIX}g++")
  # Where the aarch64 CUDA headers/libraries come from: the host toolkit's cross target files,
  # else the toolkit inside the sysroot (JetPack installs it at /usr/local/cuda).
  if(IS_DIRECTORY "${EDGEINFER_CUDA_ROOT}/targets/aarch64-linux")
    set(EDGEINFER_CUDA_TARGET_DIR "${EDGEINFER_CUDA_ROOT}/targets/aarch64-linux")
  elseif(IS_DIRECTORY "${EDGEINFER_SYSROOT}/usr/local/cuda/targets/aarch64-linux")
    set(EDGEINFER_CUDA_TARGET_DIR "${EDGEINFER_SYSROOT}/usr/local/cuda/targets/aarch64-linux")
  endif()
  if(EDGEINFER_CUDA_TARGET_DIR)
    # nvcc picks the target's headers and libraries from targets/<dir> ...
    set(CMAKE_CUDA_FLAGS_INIT "-target-dir aarch64-linux")
    # ... and FindCUDAToolkit / the libraries must be found there, outside the sysroot too.
    list(APPEND CMAKE_FIND_ROOT_PATH "${EDGEINFER_CUDA_TARGET_DIR}")
    set(CUDAToolkit_TARGET_DIR "${EDGEINFER_CUDA_TARGET_DIR}")
    set(CUDAToolkit_ROOT "${EDGEINFER_CUDA_ROOT}")
  elseif(NOT _edgeinfer_in_try_compile)
    message(WARNING "jetson-aarch64.cmake: no aarch64 CUDA target files found (looked in "
                    "${EDGEINFER_CUDA_ROOT}/targets/aarch64-linux and the sysroot); install the "
                    "cuda-cross-aarch64 package or configure with -DEDGEINFER_WITH_CUDA=OFF")
  endif()
endif()

find_program(EDGEINFER_QEMU_AARCH64 qemu-aarch64)
if(EDGEINFER_QEMU_AARCH64)
  set(CMAKE_CROSSCOMPILING_EMULATOR "${EDGEINFER_QEMU_AARCH64};-L;${EDGEINFER_SYSROOT}")
endif()
