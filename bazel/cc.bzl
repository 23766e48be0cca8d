"""cc_library, cc_binary and cc_test of the project: common headers come precompiled.

Compiling 300 translation units spends much of its time parsing the same standard library,
Abseil, protobuf and GoogleTest headers; each target here loads them from one precompiled
header per configuration instead (//bazel:common_pch, //bazel:test_pch). Include what you use
all the same: GCC reads the header text whenever the precompiled form does not apply.
"""

def _pch_copts(header):
    return ["-include", header, "-Winvalid-pch"]

COMMON_PCH_COPTS = _pch_copts("bazel/common_pch.h")
COMMON_PCH_DEPS = ["//bazel:common_pch"]
TEST_PCH_COPTS = _pch_copts("bazel/test_pch.h")
TEST_PCH_DEPS = ["//bazel:test_pch"]

# GCC 12 can crash reading a header precompiled at another optimisation level (-O1 under the
# sanitizers into a -O3 target): a target that sets its own level gets the header precompiled at
# that level, or none.
def _pch(copts, test):
    """(copts, deps) that load the precompiled header a target with `copts` can use."""
    levels = [c for c in copts if c.startswith("-O")]
    if levels == ["-O3"] and not test:
        return _pch_copts("bazel/common_pch_o3.h"), ["//bazel:common_pch_o3"]
    if levels:
        return [], []
    return (TEST_PCH_COPTS, TEST_PCH_DEPS) if test else (COMMON_PCH_COPTS, COMMON_PCH_DEPS)

def cc_library(name, copts = [], deps = [], precompiled_headers = True, **kwargs):
    """native.cc_library; test-only libraries get the test headers.

    `precompiled_headers = False` for the libraries the precompiled header itself depends on.
    """
    if precompiled_headers:
        pch_copts, pch_deps = _pch(copts, kwargs.get("testonly", False))
        copts = pch_copts + copts
        deps = deps + pch_deps
    native.cc_library(name = name, copts = copts, deps = deps, **kwargs)

def cc_binary(name, copts = [], deps = [], **kwargs):
    pch_copts, pch_deps = _pch(copts, False)
    native.cc_binary(
        name = name,
        copts = pch_copts + copts,
        deps = deps + pch_deps,
        **kwargs
    )

def cc_test(name, copts = [], deps = [], precompiled_headers = True, **kwargs):
    """native.cc_test; with `precompiled_headers` (the default) srcs see the test headers.

    Turn it off for a test whose point is what its own includes declare (a header's
    self-containedness check).
    """
    if precompiled_headers:
        pch_copts, pch_deps = _pch(copts, True)
        copts = pch_copts + copts
        deps = deps + pch_deps
    native.cc_test(name = name, copts = copts, deps = deps, **kwargs)
