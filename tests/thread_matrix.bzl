"""Tests run once per scheduler thread count, with the devices of every run sharing the threads."""

load("//bazel:cc.bzl", "TEST_PCH_COPTS", "TEST_PCH_DEPS")

def thread_matrix_test(name, srcs, deps, thread_counts = [1, 2]):
    """Builds `srcs` once (name + "_lib") and a test per thread count (name + "_<n>threads").

    Each test runs with $SHARDJIT_NUM_THREADS set to its count, so that up to 64 devices share a
    thread and switch at every collective.
    """
    native.cc_library(
        name = name + "_lib",
        testonly = True,
        srcs = srcs,
        copts = TEST_PCH_COPTS,
        deps = deps + TEST_PCH_DEPS + ["//third_party:gtest"],
        alwayslink = True,
    )
    for threads in thread_counts:
        native.cc_test(
            name = "%s_%dthreads" % (name, threads),
            env = {"SHARDJIT_NUM_THREADS": str(threads)},
            deps = [
                ":" + name + "_lib",
                "//third_party:gtest_main",
            ],
        )
