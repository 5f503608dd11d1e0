#!/usr/bin/env bash
# Prints one line naming the machine a load run measured: CPU model and
# family, cores, kernel. The same binary's ratios moved by 0.12 between two
# machines of the CI kind (RESULTS.md, twelfth pass), so every load script
# prints this line with its figures. Sourced or run: machine_line.
machine_line() {
  local model family cpu_model
  model=$(awk -F': *' '/^model name/ {print $2; exit}' /proc/cpuinfo)
  family=$(awk -F': *' '/^cpu family/ {print $2; exit}' /proc/cpuinfo)
  cpu_model=$(awk -F': *' '/^model[ \t]*:/ {print $2; exit}' /proc/cpuinfo)
  echo "machine: ${model:-unknown CPU} (family ${family:-?} model ${cpu_model:-?}), $(nproc) cores, kernel $(uname -r)"
}
if [[ "${BASH_SOURCE[0]}" == "$0" ]]; then machine_line; fi
