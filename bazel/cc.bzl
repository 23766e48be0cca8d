"""cc_library, cc_binary and cc_test of the project: common headers come precompiled.

Compiling 300 translation units spends much of its time parsing the same standard library,
Abseil, protobuf and GoogleTest headers; each target here loads them from one precompiled
header per configuration instead (//bazel:common_pch, //bazel:test_pch). Include what you use
all the same: GCC reads the header text whenever the precompiled form does not apply.
"""

def _pch_copts(header):
    return ["-include", header, "-Winvalid-pch"]

# A target that sets its own optimisation level compiles without: GCC 12 can crash reading a
# header precompiled at another level (-O1 under the sanitizers against a -O3 target).
def _own_level(copts):
    return [c for c in copts if c.startswith("-O")] != []

COMMON_PCH_COPTS = _pch_copts("bazel/common_pch.h")
COMMON_PCH_DEPS = ["//bazel:common_pch"]
TEST_PCH_COPTS = _pch_copts("bazel/test_pch.h")
TEST_PCH_DEPS = ["//bazel:test_pch"]

def cc_library(name, copts = [], deps = [], precompiled_headers = True, **kwargs):
    """native.cc_library; test-only libraries get the test headers.

    `precompiled_headers = False` for the libraries the precompiled header itself depends on.
    """
    if precompiled_headers and not _own_level(copts):
        test = kwargs.get("testonly", False)
        copts = (TEST_PCH_COPTS if test else COMMON_PCH_COPTS) + copts
        deps = deps + (TEST_PCH_DEPS if test else COMMON_PCH_DEPS)
    native.cc_library(name = name, copts = copts, deps = deps, **kwargs)

def cc_binary(name, copts = [], deps = [], **kwargs):
    if not _own_level(copts):
        copts = COMMON_PCH_COPTS + copts
        deps = deps + COMMON_PCH_DEPS
    native.cc_binary(name = name, copts = copts, deps = deps, **kwargs)

def cc_test(name, copts = [], deps = [], precompiled_headers = True, **kwargs):
    """native.cc_test; with `precompiled_headers` (the default) srcs see the test headers.

    Turn it off for a test whose point is what its own includes declare (a header's
    self-containedness check).
    """
    if precompiled_headers and not _own_level(copts):
        copts = TEST_PCH_COPTS + copts
        deps = deps + TEST_PCH_DEPS
    native.cc_test(name = name, copts = copts, deps = deps, **kwargs)
