#!/usr/bin/env bash
# Prints one line naming the machine a load run measured: CPU model and
# family, cores, kernel. The same binary's ratios moved by 0.12 between two
# machines of the CI kind (RESULTS.md, twelfth pass), so every load script
# prints this line with its figures.
field() { awk -F': *' -v key="$1" '$1 ~ "^" key "[ \t]*$" {print $2; exit}' /proc/cpuinfo; }
echo "machine: $(field 'model name') (family $(field 'cpu family') model $(field model)), $(nproc) cores, kernel $(uname -r)"
