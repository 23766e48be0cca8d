"""A GCC precompiled header built with the exact flags of the configuration that uses it."""

load("@bazel_tools//tools/build_defs/cc:action_names.bzl", "CPP_COMPILE_ACTION_NAME")
load("@bazel_tools//tools/cpp:toolchain_utils.bzl", "find_cpp_toolchain")

def _precompiled_header_impl(ctx):
    cc_toolchain = find_cpp_toolchain(ctx)
    features = cc_common.configure_features(
        ctx = ctx,
        cc_toolchain = cc_toolchain,
        requested_features = ctx.features,
        unsupported_features = ctx.disabled_features,
    )

    # The header is copied under the output tree so that GCC, asked to `-include` it, finds the
    # .gch beside it (GCC looks for `<header>.gch` in the directory where it finds the header).
    header = ctx.actions.declare_file(ctx.attr.name + ".h")
    ctx.actions.expand_template(template = ctx.file.src, output = header, substitutions = {})
    gch = ctx.actions.declare_file(ctx.attr.name + ".h.gch")

    deps = cc_common.merge_cc_infos(cc_infos = [d[CcInfo] for d in ctx.attr.deps])
    deps_context = deps.compilation_context
    variables = cc_common.create_compile_variables(
        feature_configuration = features,
        cc_toolchain = cc_toolchain,
        user_compile_flags = ctx.fragments.cpp.copts + ctx.fragments.cpp.cxxopts +
                             ctx.attr.copts + ["-x", "c++-header"],
        source_file = header.path,
        output_file = gch.path,
        include_directories = deps_context.includes,
        quote_include_directories = depset(
            [".", ctx.genfiles_dir.path],
            transitive = [deps_context.quote_includes],
        ),
        system_include_directories = deps_context.system_includes,
        preprocessor_defines = deps_context.defines,
        use_pic = True,
    )
    command = cc_common.get_memory_inefficient_command_line(
        feature_configuration = features,
        action_name = CPP_COMPILE_ACTION_NAME,
        variables = variables,
    )
    compiler = cc_common.get_tool_for_action(
        feature_configuration = features,
        action_name = CPP_COMPILE_ACTION_NAME,
    )
    ctx.actions.run(
        executable = compiler,
        arguments = command,
        inputs = depset(
            [header] + ctx.files.srcs,
            transitive = [cc_toolchain.all_files, deps_context.headers],
        ),
        outputs = [gch],
        env = cc_common.get_environment_variables(
            feature_configuration = features,
            action_name = CPP_COMPILE_ACTION_NAME,
            variables = variables,
        ),
        mnemonic = "CppPrecompileHeader",
        progress_message = "Precompiling %s" % ctx.file.src.short_path,
    )
    # Dependents compile against the headers inside the precompiled one too.
    return [
        DefaultInfo(files = depset([header, gch])),
        cc_common.merge_cc_infos(cc_infos = [
            CcInfo(compilation_context = cc_common.create_compilation_context(
                headers = depset([header, gch] + ctx.files.srcs),
            )),
            CcInfo(compilation_context = deps_context),
        ]),
    ]

precompiled_header = rule(
    implementation = _precompiled_header_impl,
    doc = """Precompiles `src` into `<name>.h` + `<name>.h.gch`.

    A target that depends on it and compiles with `-include <package>/<name>.h` loads the
    precompiled form; GCC falls back to reading the header text when the flags differ (a PCH
    is valid only for the same macros, -m and sanitizer options), so results never depend on it.
    `srcs` are project headers `src` includes (besides those of `deps`); `copts` come after the
    configuration's, as a target's own copts do.
    """,
    attrs = {
        "src": attr.label(allow_single_file = [".h"]),
        "srcs": attr.label_list(allow_files = [".h"]),
        "deps": attr.label_list(providers = [CcInfo]),
        "copts": attr.string_list(),
        "_cc_toolchain": attr.label(default = "@bazel_tools//tools/cpp:current_cc_toolchain"),
    },
    toolchains = ["@bazel_tools//tools/cpp:toolchain_type"],
    fragments = ["cpp"],
    incompatible_use_toolchain_transition = True,
)
