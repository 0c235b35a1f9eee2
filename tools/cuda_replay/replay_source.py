#!/usr/bin/python3
"""Turns a CUDA source of kernels/cuda into the C++ that tests/cuda_replay
runs on the CPU (tests/cuda_replay/cuda_replay.h says how):

  K<<<grid, block[, shared[, stream]]>>>(args)
      -> ::twice::cuda_replay::Launch(K, grid, block[, ...])(args)
  extern __shared__ [__align__(n)] T name[];
      -> T* name = static_cast<T*>(::twice::cuda_replay::DynamicSharedMemory());
  __shared__ T name[...];
      -> static T name[...]; ::twice::cuda_replay::FillShared(&name, sizeof(name));
         (a block's shared memory starts as 0xFF bytes, NaN floats, as its
         dynamic shared memory does)
  #include <cuda_runtime.h>
      -> #include <cuda_runtime_api.h> (the device declarations of the full
         header name what cuda_replay.h defines as macros)

and includes cuda_replay.h first. Usage: replay_source.py IN.cu OUT.cc
"""
import re
import sys

LAUNCH = re.compile(
    r"([A-Za-z_]\w*(?:<[^<>;()]*>)?)\s*<<<(.*?)>>>\s*\(", re.DOTALL)
STATIC_SHARED = re.compile(
    r"^(\s*)__shared__\s+((?:__align__\(\s*\d+\s*\)\s+)?[\w:<> ]+?)\s+(\w+)"
    r"((?:\s*\[[^\]\n]*\])*)\s*;", re.MULTILINE)
EXTERN_SHARED = re.compile(
    r"extern\s+__shared__\s+(?:__align__\(\s*\d+\s*\)\s+)?([\w ]+?)\s+(\w+)"
    r"\s*\[\s*\]\s*;")


def transform(text):
    text, launches = LAUNCH.subn(
        lambda m: "::twice::cuda_replay::Launch(%s, %s)(" % (
            m.group(1), " ".join(m.group(2).split())), text)
    text = EXTERN_SHARED.sub(
        lambda m: "%s* %s = static_cast<%s*>("
        "::twice::cuda_replay::DynamicSharedMemory());" % (
            m.group(1), m.group(2), m.group(1)), text)
    text = STATIC_SHARED.sub(
        lambda m: "%sstatic %s %s%s; ::twice::cuda_replay::FillShared(&%s, "
        "sizeof(%s));" % (m.group(1), m.group(2), m.group(3), m.group(4),
                          m.group(3), m.group(3)), text)
    text = text.replace("#include <cuda_runtime.h>",
                        "#include <cuda_runtime_api.h>")
    if re.search(r"\b__shared__\b", text):
        raise SystemExit("a __shared__ declaration the replay could not read")
    if "<<<" in text or ">>>" in text:
        raise SystemExit("a launch the replay could not read")
    return launches, text


def main():
    source, target = sys.argv[1], sys.argv[2]
    with open(source, encoding="utf-8") as f:
        launches, text = transform(f.read())
    header = ("// Generated from %s by tools/cuda_replay/replay_source.py "
              "(%d launches).\n#include \"tests/cuda_replay/cuda_replay.h\"\n"
              "#line 1 \"%s\"\n" % (source.split("/kernels/")[-1], launches,
                                    source))
    with open(target, "w", encoding="utf-8") as f:
        f.write(header + text)


if __name__ == "__main__":
    main()
