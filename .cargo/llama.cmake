# Included before every project() call of llama.cpp's CMake build (see config.toml beside
# this file). hevo uses llama.cpp's core library and ggml only; `common` (argument parsing,
# chat templates, the HTTP downloader and its vendored cpp-httplib: 53 of 129 objects) is
# not built. llama-cpp-sys-2 links `common` only when its build directory exists, and the
# wrapper objects that call into it are never pulled into hevo's binary (nothing calls
# them), so the link needs nothing of it.
set(LLAMA_BUILD_COMMON OFF CACHE BOOL "" FORCE)
