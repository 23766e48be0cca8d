#!/usr/bin/env bash
# Installs the Debian 12 packages shardjit builds with, if any is missing.
set -euo pipefail
packages=(bazel-bootstrap bazel-rules-java g++ libabsl-dev libfmt-dev libxbyak-dev libgtest-dev
          libgmock-dev libprotobuf-dev protobuf-compiler libbenchmark-dev libgloo-dev)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}" >&2
  sudo_cmd=""
  [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${missing[@]}" >&2
fi
