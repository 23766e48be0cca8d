"""libFuzzer targets whose corpus also runs as a test in every build."""

def fuzz_target(name, srcs, deps, corpus):
    """Defines name + "_lib" (the LLVMFuzzerTestOneInput), name + "_corpus_test" and name.

    The corpus test runs every file under `corpus` through the target with any compiler, so each
    input kept there (seeds and every crash found) is a regression test of //... . The fuzzer
    itself (`name`) links libFuzzer, which needs clang and --config=fuzz (scripts/fuzz.sh), so it
    is tagged manual.
    """
    native.cc_library(
        name = name + "_lib",
        srcs = srcs,
        deps = deps,
        alwayslink = True,
    )
    native.cc_test(
        name = name + "_corpus_test",
        args = [native.package_name() + "/" + corpus],
        data = native.glob([corpus + "/**"]),
        deps = [
            ":" + name + "_lib",
            "//fuzz:corpus_main",
        ],
    )
    native.cc_binary(
        name = name,
        linkopts = ["-fsanitize=fuzzer"],
        tags = ["manual"],
        deps = [":" + name + "_lib"],
    )
