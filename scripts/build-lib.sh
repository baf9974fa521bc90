# Shared by the guest and example build scripts (sourced, not run).

# needs_build OUTPUT DEPENDENCY... : true when OUTPUT is missing, older than a
# dependency, or FORCE=1.
needs_build() {
    local out=$1
    shift
    [[ ${FORCE:-0} == 1 || ! -e "$out" ]] && return 0
    local dep
    for dep in "$@"; do
        [[ "$dep" -nt "$out" ]] && return 0
    done
    return 1
}
