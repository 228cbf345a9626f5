# docent-terminal-mcp shell integration for zsh (5.3 or later).
#
# The zsh twin of integration.bash: the same OSC 133 markers, the same
# sequence numbers and the same proofs (see the module doc of
# src/marker.rs), so the logger cannot tell the two shells apart.
#
# Where the markers come from:
#   D  (command end)   the first precmd hook, before any other hook prints
#   A, B  (prompt)     PS1 = A . the user's PS1 . B, rebuilt by the last
#                      precmd hook, so a theme that rebuilds PS1 in its own
#                      hook is wrapped again
#   A;k=s, B  (PS2)    PS2 likewise, renewed after every line read, so each
#                      continuation prompt carries a fresh sequence number
#   C  (output start)  the last preexec hook
# Our markers are taken out of the prompts by plain string substitution
# (GLOB_SUBST is off under `emulate -L zsh`).
# The values inside the prompt markers are computed when the hook runs and
# put into the prompt as literal text (zsh does not evaluate arithmetic in
# prompts unless PROMPT_SUBST is set, and that is the user's choice).
# A prompt drawn again (a window resize, a completion list) repeats its
# markers with the same number, and the logger believes only the first.
# Nothing here forks. One thing a person sees changes: PROMPT_SP and
# PROMPT_CR are turned off (see __dtmcp_take_sp).
#
# Read from the environment:
#   __DTMCP_NONCE  the session secret; without it no marker is printed
#   __DTMCP_TTY    the session's terminal; set here ($TTY) on first load
# Exported for shells started inside:
#   __DTMCP_TTY; ZDOTDIR (our shell/zsh, so a zsh started inside reads our
#   files, which read the user's) with the user's own in __DTMCP_ZDOTDIR;
#   PROMPT_COMMAND and __DTMCP_BASH_LOADER, which make a bash started
#   inside load integration.bash before its first prompt.

# Loaded twice (shell_integrate typed again, a user's `source ~/.zshrc`):
# the hooks are in place already; only the directory may have moved.
typeset -g __DTMCP_ZSH_INT=${${(%):-%x}:A}

__dtmcp_ret() { return $1 }

# Reads the four keys out of __DTMCP_NONCE; markers stay off unless every
# key is in 1..2^31-2.
__dtmcp_keys() {
    emulate -L zsh
    typeset -g __DTMCP_NONCE_SEEN=${__DTMCP_NONCE-} __DTMCP_ON=0
    local -a k
    k=(${(s:.:)__DTMCP_NONCE_SEEN})
    (( $#k == 4 )) || return 0
    local x
    for x in $k; do
        [[ $x == <-> && $#x -le 10 ]] || return 0
        (( 10#$x >= 1 && 10#$x < 2147483647 )) || return 0
    done
    typeset -gi __DTMCP_K0=$((10#$k[1])) __DTMCP_K1=$((10#$k[2])) __DTMCP_K2=$((10#$k[3])) __DTMCP_K3=$((10#$k[4]))
    __DTMCP_ON=1
}

# Percent-encodes into the variable named $1 what would break a marker
# (`;`, `%`, control characters) or be read by the prompt expander
# (`$`, `` ` ``, `\`, `!`).
__dtmcp_pct() {
    emulate -L zsh
    local s=$2 out= c h
    for c in ${(s::)s}; do
        case $c in
        [\;%\$\`\\!]|[[:cntrl:]]) printf -v h '%%%02X' "'$c"; out+=$h ;;
        *) out+=$c ;;
        esac
    done
    typeset -g $1=$out
}

# Starts this process's markers: a fresh sequence (microseconds since the
# epoch, so a later shell that gets the same pid starts above the old one).
__dtmcp_start() {
    emulate -L zsh
    typeset -gi __DTMCP_PID=$$ __DTMCP_SEQ=0 __DTMCP_RAN=0
    if zmodload zsh/datetime 2>/dev/null; then
        __DTMCP_SEQ=$(( epochtime[1] * 1000000 + epochtime[2] / 1000 ))
    else
        __DTMCP_SEQ=$(( SECONDS * 1000000 ))
    fi
    __dtmcp_pct __DTMCP_HOST ${HOST-}
    __dtmcp_pct __DTMCP_USER ${USERNAME-}
}

# The next marker's `dtmcp=PID.SEQ.PROOF` for kind $1, into __dtmcp_m.
# Mirrors Secret::proof; every product has both factors below 2^31.
__dtmcp_mark() {
    local -i s=$(( ++__DTMCP_SEQ )) x
    x=$(( ( ((s & 2147483647) ^ __DTMCP_K0) * __DTMCP_K1 + (s >> 31) + 1 ) % 2147483647 ))
    x=$(( ((x ^ (__DTMCP_PID & 134217727) ^ ($1 << 27)) * __DTMCP_K2 + __DTMCP_K3) % 2147483647 ))
    x=$(( ((x ^ (x >> 15)) * __DTMCP_K0 + __DTMCP_K2) % 2147483647 ))
    x=$(( ((x ^ (x >> 13)) * __DTMCP_K3 + __DTMCP_K1) % 2147483647 ))
    __dtmcp_m="dtmcp=$__DTMCP_PID.$s.$x"
}

# Whether markers go out now: keys known, and the shell's stderr is the
# session's own terminal (a shell on a pty of its own -- expect, pexpect
# -- must see its prompts unchanged).
__dtmcp_live() {
    if [[ ${__DTMCP_NONCE-} != "${__DTMCP_NONCE_SEEN-}" || -z ${__DTMCP_ON-} ]]; then __dtmcp_keys; fi
    if [[ ${__DTMCP_PID-} != $$ ]]; then __dtmcp_start; fi
    [[ $__DTMCP_ON == 1 && -n ${__DTMCP_TTY-} && /dev/stderr -ef $__DTMCP_TTY ]]
}

# The first precmd hook: how the last command ended.
__dtmcp_precmd() {
    # One command, so that $pipestatus is still the last command's.
    local __dtmcp_s=$? __dtmcp_ps=($pipestatus)
    emulate -L zsh
    local __dtmcp_m
    if (( __DTMCP_RAN )) && __dtmcp_live; then
        __dtmcp_mark 4
        print -rnu2 -- $'\e]133;D;'"$__dtmcp_s;$__dtmcp_m;ps=${(j:,:)__dtmcp_ps}"$'\a'
    fi
    __DTMCP_RAN=0
    # Someone added hooks after ours: ours go back to the ends, from the
    # next prompt on.
    if [[ $precmd_functions[1] != __dtmcp_precmd || $precmd_functions[-1] != __dtmcp_take_sp ]]; then
        __dtmcp_order
    fi
    __dtmcp_ret $__dtmcp_s
}

# zsh marks output left without a newline (PROMPT_SP: a `%`, spaces up
# to the margin so the terminal wraps, a carriage return) before any hook
# runs. The mark would land inside the command's region ahead of the D
# marker, and the log, which keeps lines unwrapped, would see the next
# prompt written over the output (PROMPT_CR's carriage return). With
# markers on, both are turned off: as in bash, a prompt after such output
# follows it on the same line. Run at load and as the last hook (not under
# `emulate -L`, whose LOCAL_OPTIONS would undo it), so they are turned off
# again if set later.
__dtmcp_take_sp() {
    if [[ $__DTMCP_ON == 1 ]] && [[ -o prompt_sp || -o prompt_cr ]]; then
        unsetopt prompt_sp prompt_cr
    fi
}

# Takes our markers out of PS1 and PS2 (where a theme may have copied
# them) and, when markers are live, puts fresh ones around them.
__dtmcp_wrap() {
    local p1=${PS1-} p2=${PS2-} __dtmcp_m
    if [[ -n ${__DTMCP_A-} ]]; then
        p1=${p1//${__DTMCP_A}/} p1=${p1//${__DTMCP_B1}/}
        p2=${p2//${__DTMCP_S}/} p2=${p2//${__DTMCP_B2}/}
    fi
    typeset -g __DTMCP_A= __DTMCP_B1= __DTMCP_S= __DTMCP_B2=
    if [[ $1 == 1 ]]; then
        __dtmcp_mark 1
        __DTMCP_A=$'%{\e]133;A;'"$__dtmcp_m;host=${__DTMCP_HOST//\%/%%};user=${__DTMCP_USER//\%/%%}"$'\a%}'
        __dtmcp_mark 2
        __DTMCP_B1=$'%{\e]133;B;'"$__dtmcp_m;cols=$COLUMNS"$'\a%}'
        __dtmcp_wrap2
        p1=$__DTMCP_A$p1$__DTMCP_B1 p2=$__DTMCP_S$p2$__DTMCP_B2
    fi
    PS1=$p1 PS2=$p2
}

# Fresh markers for the next continuation prompt.
__dtmcp_wrap2() {
    local __dtmcp_m
    __dtmcp_mark 5
    __DTMCP_S=$'%{\e]133;A;k=s;'"$__dtmcp_m"$'\a%}'
    __dtmcp_mark 2
    __DTMCP_B2=$'%{\e]133;B;'"$__dtmcp_m;cols=$COLUMNS"$'\a%}'
}

# The last precmd hook: wraps the prompts as the user's hooks left them.
__dtmcp_prompt() {
    local -i __dtmcp_s=$? __dtmcp_pp=0
    # The markers hide behind %{ %}, which need the user's PROMPT_PERCENT.
    [[ -o prompt_percent ]] && __dtmcp_pp=1
    emulate -L zsh
    if (( __dtmcp_pp )) && __dtmcp_live; then __dtmcp_wrap 1; else __dtmcp_wrap 0; fi
    __dtmcp_ret $__dtmcp_s
}

# After every line read: the next continuation prompt gets new numbers.
__dtmcp_line_finish() {
    emulate -L zsh
    [[ -n ${__DTMCP_S-} ]] || return 0
    local p2=${PS2//${__DTMCP_S}/}
    p2=${p2//${__DTMCP_B2}/}
    __dtmcp_wrap2
    PS2=$__DTMCP_S$p2$__DTMCP_B2
}

# The last preexec hook: the command's output starts.
__dtmcp_preexec() {
    emulate -L zsh
    local __dtmcp_m
    if __dtmcp_live; then
        __dtmcp_mark 3
        print -rnu2 -- $'\e]133;C;'"$__dtmcp_m"$'\a'
        __DTMCP_RAN=1
    fi
}

# Puts our hooks where they belong: the D hook first, the prompt hook and
# the C hook last.
__dtmcp_order() {
    emulate -L zsh
    typeset -ga precmd_functions preexec_functions
    precmd_functions=(__dtmcp_precmd ${precmd_functions:#__dtmcp_(precmd|prompt|take_sp)} __dtmcp_prompt __dtmcp_take_sp)
    preexec_functions=(${preexec_functions:#__dtmcp_preexec} __dtmcp_preexec)
}

# What shells started inside inherit.
__dtmcp_export() {
    emulate -L zsh
    if [[ -z ${__DTMCP_TTY-} && -t 0 ]]; then export __DTMCP_TTY=${TTY-}; fi
    export __DTMCP_TTY
    local dir=${__DTMCP_ZSH_INT:h}
    # A zsh inside reads our ZDOTDIR, whose files read the user's.
    if [[ -r $dir/zsh/.zshenv && ${ZDOTDIR-} != $dir/zsh ]]; then
        if (( ${+ZDOTDIR} )); then export __DTMCP_ZDOTDIR=$ZDOTDIR; else unset __DTMCP_ZDOTDIR; fi
        export ZDOTDIR=$dir/zsh
    fi
    # A bash inside loads integration.bash from its first prompt.
    if [[ -r $dir/integration.bash ]]; then
        export __DTMCP_BASH_LOADER=". ${(q)dir}/integration.bash && __dtmcp_hook"
        export PROMPT_COMMAND=$__DTMCP_BASH_LOADER
    fi
}

__dtmcp_export
__dtmcp_order
__dtmcp_take_sp
if [[ -z ${__DTMCP_LOADED-} ]]; then
    typeset -g __DTMCP_LOADED=1
    # No history expansion: agents write their commands for a shell
    # without it (`git commit -m "done!!"`). `setopt bang_hist` brings it
    # back.
    if [[ -o interactive ]]; then unsetopt bang_hist; fi
    if autoload -Uz add-zle-hook-widget 2>/dev/null; then
        add-zle-hook-widget line-finish __dtmcp_line_finish 2>/dev/null
    fi
    # Markers begin with the next prompt, not with this line's end.
    typeset -gi __DTMCP_RAN=0
    # ctrl+g in vi's command mode goes back to insert mode (zsh's default
    # there lists expansions). A run presses ctrl+g after an agent's
    # Escape, so that its command is typed as text in either mode.
    bindkey -M vicmd '^G' vi-insert 2>/dev/null
fi
