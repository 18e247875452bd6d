# aarch64-linux-gnu.cmake — cross-compiling meshtrain for 64-bit ARM Linux on
# a Debian amd64 host (`make test-aarch64`, tests/aarch64.sh):
#
#   cmake -S . -B build-arm -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake \
#         -DMT_DNNL=OFF -DCMAKE_DISABLE_FIND_PACKAGE_MPI=ON
#
# Needs gcc-aarch64-linux-gnu and the arm64 libraries of Debian's multiarch
# (dpkg --add-architecture arm64; libopenblas-dev:arm64, libsleef-dev:arm64).
# Without MPI: libopenmpi-dev:arm64 would remove the amd64 one, and with it
# the host's toolchain. The programs run under qemu-aarch64 with
# QEMU_LD_PREFIX=/ (tests/aarch64.sh says why not /usr/aarch64-linux-gnu).
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)

set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)

# Libraries and headers from the cross toolchain's root and from the arm64
# multiarch directories, never the host's; programs (pkg-config, bash) from
# the host.
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE BOTH)

# pkg-config reads only the arm64 .pc files (openblas, sleef). Set here, so
# a re-run of cmake from the build tree finds them too.
set(ENV{PKG_CONFIG_LIBDIR} /usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig)
set(ENV{PKG_CONFIG_PATH} "")

# try_run and ctest run the programs under qemu. "-L /": the loader of
# libc6:arm64, the glibc whose libc.so.6 the programs get; the cross
# toolchain's older loader with that libc.so.6 hangs in pthread_create.
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64 -L /)
