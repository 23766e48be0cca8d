// What tests include besides bazel/common_headers.h, precompiled with it (//bazel:test_pch).
#include "bazel/common_headers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
