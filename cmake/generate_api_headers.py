#!/usr/bin/env python3
"""Generates the public headers that are not written by hand (cmake/ShmoeApiHeaders.cmake runs it
when CMake configures):

  shmem.h, pshmem.h   the C preprocessor expands the declaration macros of functions.h
                      over the type tables (the one place each family's signature is written);
                      the flat prototypes, one per line in the specification's spacing
                      (`void shmem_long_put(long *dest, const long *source, size_t nelems, int
                      pe);`), replace @SHMOE_PROTOTYPES@ in shmem.h.in and pshmem.h.in (the
                      latter with the pshmem_ prefix).
  shmoe/generic.h     for each type-generic name that generic.h.in defines as a C11
                      selection (over SHMOE_GENERIC_CTX, _ARG0 or _ARG1; the names deprecated by
                      1.4 have no C++ form), every function the selection can pick becomes a C++
                      overload `inline RET NAME(PARAMS) { return TYPED(ARGS); }`, replacing
                      @SHMOE_CXX_OVERLOADS@.

The templates (shmem.h.in, pshmem.h.in, generic.h.in) and functions.h are read from TEMPLATE_DIR
(cmake/api: they are not headers of the install); the type tables from INCLUDE_SOURCE_DIR
(include). A file is rewritten only when its text changes, so an unchanged header does not rebuild
the tree.

    generate_api_headers.py CC TEMPLATE_DIR INCLUDE_SOURCE_DIR OUTPUT_DIR
"""

import os
import re
import subprocess
import sys


def preprocess(cc, dirs, source, defines=()):
    """The C preprocessor's output for `source` (text), without line markers; `dirs` are the
    template and the include directory."""
    cmd = [cc, "-std=c11", "-E", "-P", *[f"-I{d}" for d in dirs], *[f"-D{d}" for d in defines],
           "-"]
    done = subprocess.run(cmd, input=source, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"generate_api_headers: the preprocessor failed on:\n{source}\n{done.stderr}")
    return done.stdout


def flat_prototypes(cc, dirs, prefix):
    """The declarations of functions.h with name prefix `prefix` ("" or "p"), one per
    line; those marked SHMOE_C_ONLY guarded from C++ (the type-generic overloads take their
    names) except in the library file that defines them (SHMOE_NO_CXX_OVERLOADS)."""
    marker = "shmoe_prototypes_begin"
    text = preprocess(cc, dirs,
                      f'#include "shmoe/collective_types.h"\n{marker}\n#include "functions.h"\n',
                      [f"SHMOE_PREFIX={prefix}"])
    if marker not in text:
        sys.exit("generate_api_headers: the preprocessed functions.h lost its start marker")
    # The tables' own typedefs and system headers come before the marker and are dropped.
    text = " ".join(text.split(marker, 1)[1].split())
    lines = []
    for decl in text.split(";"):
        decl = decl.strip()
        if not decl:
            continue
        decl = re.sub(r" *\* *", " *", decl)
        decl = re.sub(r" *\( *", "(", decl)
        decl = re.sub(r" *\)", ")", decl)
        decl = re.sub(r" *, *", ", ", decl)
        if re.search(r"SHMOE_[A-Z_]*\(|##", decl):
            sys.exit(f"generate_api_headers: functions.h left a macro unexpanded: {decl}")
        if decl.startswith("SHMOE_C_ONLY "):
            lines += ["#if !defined(__cplusplus) || defined(SHMOE_NO_CXX_OVERLOADS)",
                      decl[len("SHMOE_C_ONLY "):] + ";", "#endif"]
        else:
            lines.append(decl + ";")
    return lines


def cxx_overloads(cc, dirs, prototypes):
    """The C++ overloads of the type-generic names, one per line."""
    with open(os.path.join(dirs[0], "generic.h.in")) as f:
        generic = f.read().replace("\\\n", " ")  # one line per definition
    families = []
    for define in re.findall(r"#define shmem_[a-z_0-9]+\(\.\.\.\)[^\n]*", generic):
        if re.search(r"SHMOE_GENERIC_(CTX|ARG0|ARG1)", define) and "SHMOE_DEPRECATED_" not in define:
            families.append(re.search(r"shmem_[a-z_0-9]+", define).group(0))
    driver = '#include "shmoe/collective_types.h"\n#include "generic.h.in"\n' + "".join(
        f"shmoe_family {name} {name}(shmoe_arg0, shmoe_arg1)\n" for name in families)
    expansions = " ".join(preprocess(cc, dirs, driver).split()).split("shmoe_family ")
    # name -> (return type, parameters), from the flat prototypes.
    declared = {}
    for line in prototypes:
        m = re.match(r"^(.*[ *])(shmem_[a-z_0-9]+)\((.*)\);$", line)
        if m:
            declared[m.group(2)] = (m.group(1), m.group(3))
    out = []
    for expansion in expansions:
        m = re.match(r"^(shmem_[a-z_0-9]+)", expansion)
        if not m or m.group(1) not in families:
            continue
        name = m.group(1)
        typed = list(dict.fromkeys(re.findall(r": (shmem_[a-z_0-9]+)", expansion)))
        if not typed:
            sys.exit(f"generate_api_headers: the C11 selection {name} of generic.h.in "
                     "selects no function")
        for fn in typed:
            if fn not in declared:
                sys.exit(f"generate_api_headers: {name} selects {fn}, which shmem.h does not "
                         "declare")
            ret, params = declared[fn]
            args = ", ".join(re.search(r"[A-Za-z_][A-Za-z_0-9]*$", p).group(0)
                             for p in params.split(", "))
            out.append(f"inline {ret}{name}({params}) {{ return {fn}({args}); }}")
    return out


def write_if_changed(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if os.path.exists(path):
        with open(path) as f:
            if f.read() == text:
                return
    with open(path, "w") as f:
        f.write(text)


def from_template(template_dir, template, out_path, placeholder, lines):
    with open(os.path.join(template_dir, template)) as f:
        text = f.read()
    if placeholder not in text:
        sys.exit(f"generate_api_headers: {template} has no {placeholder}")
    write_if_changed(out_path, text.replace(placeholder, "".join(line + "\n" for line in lines)))


def main():
    cc, template_dir, include_dir, out_dir = sys.argv[1:5]
    dirs = (template_dir, include_dir)
    prototypes = flat_prototypes(cc, dirs, "")
    from_template(template_dir, "shmem.h.in", os.path.join(out_dir, "shmem.h"),
                  "@SHMOE_PROTOTYPES@", prototypes)
    from_template(template_dir, "generic.h.in", os.path.join(out_dir, "shmoe", "generic.h"),
                  "@SHMOE_CXX_OVERLOADS@", cxx_overloads(cc, dirs, prototypes))
    from_template(template_dir, "pshmem.h.in", os.path.join(out_dir, "pshmem.h"),
                  "@SHMOE_PROTOTYPES@", flat_prototypes(cc, dirs, "p"))


if __name__ == "__main__":
    main()
