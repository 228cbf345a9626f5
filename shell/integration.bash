# docent-terminal-mcp shell integration for bash (4.4 or later; 5.x best).
#
# Makes the shell mark its prompts and commands with OSC 133 sequences, so
# the pane logger can split the output into one region per command and
# learn each command's exit status.  The exact bytes are specified in the
# module doc of src/marker.rs; both sides must change together.
#
# Every marker carries the shell's pid, a sequence number that only grows,
# and a proof: a keyed hash of (kind, pid, seq) under the session's secret,
# which the server hands over as __DTMCP_NONCE="k0.k1.k2.k3".  The secret
# never reaches the terminal, so replaying a logged marker proves nothing.
#
# Cost matters: the hook runs before every prompt.  Nothing here forks
# except one `tty` when the file is first loaded; the proofs are computed
# by bash arithmetic, inside the prompt strings themselves.
#
# Read from the environment:
#   __DTMCP_NONCE  the session secret; without it no marker is printed
#   __DTMCP_TTY    the session's terminal; set here on first load
# Exported for shells started inside (they inherit the hook through
# PROMPT_COMMAND and the exported functions):
#   __DTMCP_TTY, __DTMCP_K0..__DTMCP_K3, PROMPT_COMMAND, the __dtmcp_* functions
# Per process, not exported (a child starts its own sequence):
#   __DTMCP_PID, __DTMCP_SEQ, __DTMCP_KIND, __DTMCP_RAN, __DTMCP_PF,
#   __DTMCP_HOST, __DTMCP_USER, __DTMCP_ON, __DTMCP_NONCE_SEEN,
#   __DTMCP_USER_PC, __DTMCP_WRAPPED, __DTMCP_PS1, __DTMCP_PS2, __DTMCP_PS0,
#   __DTMCP_NIL (always empty), __DTMCP_YES

# Returns its argument as a status, so the user's prompt commands see the
# `$?` they would have seen without us.
__dtmcp_ret() { return "$1"; }

# Reads the four keys out of __DTMCP_NONCE; markers stay off unless every
# key is in 1..2^31-2.  `10#` keeps a leading zero from meaning octal.
__dtmcp_keys() {
    __DTMCP_NONCE_SEEN=${__DTMCP_NONCE-}
    __DTMCP_ON=0
    local d='([0-9]{1,10})'
    if [[ $__DTMCP_NONCE_SEEN =~ ^$d\.$d\.$d\.$d$ ]]; then
        export __DTMCP_K0=$((10#${BASH_REMATCH[1]})) __DTMCP_K1=$((10#${BASH_REMATCH[2]}))
        export __DTMCP_K2=$((10#${BASH_REMATCH[3]})) __DTMCP_K3=$((10#${BASH_REMATCH[4]}))
        local k
        __DTMCP_ON=1
        for k in "$__DTMCP_K0" "$__DTMCP_K1" "$__DTMCP_K2" "$__DTMCP_K3"; do
            if ((k < 1 || k >= 2147483647)); then __DTMCP_ON=0; fi
        done
    fi
}

# Percent-encodes `;`, `%` and control characters of $2 into the variable
# named $1, so a host or user name cannot break the marker's syntax.
__dtmcp_pct() {
    local s=$2 out='' c i
    if [[ $s == *[\;%[:cntrl:]]* ]]; then
        for ((i = 0; i < ${#s}; i++)); do
            c=${s:i:1}
            case $c in [\;%[:cntrl:]]) printf -v c '%%%02X' "'$c" ;; esac
            out+=$c
        done
    else
        out=$s
    fi
    printf -v "$1" %s "$out"
}

# Starts this process's markers: a fresh sequence (microseconds since the
# epoch, so a later shell that gets the same pid starts above the old one)
# and the proof expression the prompts evaluate.
__dtmcp_start() {
    __DTMCP_PID=$$
    __DTMCP_SEQ=${EPOCHREALTIME//[!0-9]/}
    if [[ -z $__DTMCP_SEQ ]]; then
        printf -v __DTMCP_SEQ '%(%s)T' -1
        __DTMCP_SEQ=$((__DTMCP_SEQ * 1000000))
    fi
    __DTMCP_RAN=0 __DTMCP_KIND=0 __dtmcp_x=0 __DTMCP_YES=('' 1)
    declare -gA __DTMCP_NIL=()
    # The proof of (__DTMCP_KIND, __DTMCP_PID, __DTMCP_SEQ).  Bash evaluates
    # a variable holding an expression when arithmetic names it, so the
    # prompts say only $((__DTMCP_PF)).  Every product has both factors
    # below 2^31, so nothing overflows 64 bits.  Mirrors Secret::proof.
    __DTMCP_PF='__dtmcp_x=(((__DTMCP_SEQ&2147483647)^__DTMCP_K0)*__DTMCP_K1+(__DTMCP_SEQ>>31)+1)%2147483647,'
    __DTMCP_PF+='__dtmcp_x=((__dtmcp_x^(__DTMCP_PID&134217727)^(__DTMCP_KIND<<27))*__DTMCP_K2+__DTMCP_K3)%2147483647,'
    __DTMCP_PF+='__dtmcp_x=((__dtmcp_x^(__dtmcp_x>>15))*__DTMCP_K0+__DTMCP_K2)%2147483647,'
    __DTMCP_PF+='((__dtmcp_x^(__dtmcp_x>>13))*__DTMCP_K3+__DTMCP_K1)%2147483647'
    local u='\u'
    __dtmcp_pct __DTMCP_HOST "${HOSTNAME-}"
    __dtmcp_pct __DTMCP_USER "${u@P}"
}

# Prints the end-of-command marker: $1 the exit status, the rest the
# statuses of the pipeline's stages.
__dtmcp_done() {
    local s=$1 seq IFS=,
    shift
    __DTMCP_KIND=4
    seq=$((++__DTMCP_SEQ))
    printf '\e]133;D;%s;dtmcp=%s.%s.%s;ps=%s\a' "$s" "$__DTMCP_PID" "$seq" "$((__DTMCP_PF))" "$*" >&2
}

# Takes over PROMPT_COMMAND: whatever it holds (a string, or the array
# form of bash 5.1) becomes the user's part, run by the hook, and the hook
# becomes the only prompt command, so it is first to see `$?`.  Where our
# own name appears in it (someone added to the hook rather than replacing
# it), it stands for the user's part we ran in its place until now.
__dtmcp_adopt() {
    local - pc old=${__DTMCP_USER_PC-} IFS=$'\n'
    set +u
    if [[ ${PROMPT_COMMAND@a} == *a* ]]; then
        pc="${PROMPT_COMMAND[*]}"
    else
        pc=${PROMPT_COMMAND-}
    fi
    if [[ $pc == __dtmcp_hook && ${PROMPT_COMMAND@a} != *a* ]]; then return 0; fi
    # A group keeps the old part whole wherever the name stood; with no
    # old part, a status pass-through keeps `$?` for what follows.
    if [[ -n $old ]]; then old="{ $old"$'\n''}'; else old='__dtmcp_ret $?'; fi
    __DTMCP_USER_PC=${pc//__dtmcp_hook/"$old"}
    unset PROMPT_COMMAND
    export PROMPT_COMMAND=__dtmcp_hook
}

# Puts the markers around PS1, PS2 and PS0 when $1 is 1, and takes them
# out otherwise.  Ours are removed before they are added, so a framework
# that rebuilt PS1 (from scratch or from the wrapped one) is wrapped again
# and nothing is wrapped twice.  The markers are text for the prompt
# expander: the arithmetic runs in this shell as each prompt is shown, so
# every marker gets its own sequence number.
__dtmcp_wrap() {
    # Most prompts find the strings as this function left them.
    if [[ $1 == "${__DTMCP_WRAPPED-}" && ${PS1-} == "${__DTMCP_PS1-}" && ${PS2-} == "${__DTMCP_PS2-}" &&
        ${PS0-} == "${__DTMCP_PS0-}" ]]; then
        return 0
    fi
    # shellcheck disable=SC2016 # expanded later, by the prompt expander
    local m='dtmcp=${__DTMCP_PID}.$((__DTMCP_KIND='
    # shellcheck disable=SC2016
    local p='++__DTMCP_SEQ)).$((__DTMCP_PF))'
    local a="\[\e]133;A;${m}1,$p;host=\${__DTMCP_HOST};user=\${__DTMCP_USER}\a\]"
    local s="\[\e]133;A;k=s;${m}5,$p\a\]"
    local b="\[\e]133;B;${m}2,$p;cols=\${COLUMNS-}\a\]"
    # Before the C marker, while __DTMCP_RAN still says whether the hook
    # ran since the last command: when it did not (a command emptied or
    # replaced PROMPT_COMMAND, as sourcing a bashrc can), the rescue is
    # put back as a prompt command, alone when the variable is empty, and
    # otherwise after the new ones (bash 5.1 runs every element of an
    # array PROMPT_COMMAND).  Only a taken `:+` expands its word, so the
    # variable stays a plain exported string on every other prompt; the
    # lookup of an empty associative array shows nothing of it.
    # shellcheck disable=SC2016
    local r='${__DTMCP_NIL[${__DTMCP_YES[__DTMCP_RAN&&0${PROMPT_COMMAND:+1}]:+${PROMPT_COMMAND[99]:=__dtmcp_rescue}}${PROMPT_COMMAND:=__dtmcp_rescue}]-}'
    local c="$r\e]133;C;${m}3,__DTMCP_RAN=1,$p\a"
    local p1=${PS1-} p2=${PS2-} p0=${PS0-}
    p1=${p1//"$a"/} p1=${p1//"$b"/} p2=${p2//"$s"/} p2=${p2//"$b"/} p0=${p0//"$c"/}
    if [[ $1 == 1 ]]; then
        PS1=$a$p1$b PS2=$s$p2$b PS0=$p0$c
    else
        PS1=$p1 PS2=$p2 PS0=$p0
    fi
    __DTMCP_WRAPPED=$1 __DTMCP_PS1=$PS1 __DTMCP_PS2=$PS2 __DTMCP_PS0=$PS0
}

# Brought back by PS0 (see __dtmcp_wrap) when the hook stopped running:
# takes PROMPT_COMMAND over again, with what it holds now as the user's
# part, and runs the hook for this prompt.  Alone in PROMPT_COMMAND it
# ran first and `$?` is the command's; after the user's new prompt
# commands it is theirs, so this command's status goes unreported (its
# region still ends at the marked prompt).  The user's part already ran
# this prompt, or was removed on purpose: the hook does not run it now.
__dtmcp_rescue() {
    local __dtmcp_s=$? -
    set +eux
    if [[ ${PROMPT_COMMAND-} == __dtmcp_rescue ]]; then
        unset PROMPT_COMMAND
        __DTMCP_USER_PC=
        export PROMPT_COMMAND=__dtmcp_hook
    else
        unset 'PROMPT_COMMAND[99]'
        if [[ ${PROMPT_COMMAND[*]} != *__dtmcp_hook* ]]; then __DTMCP_RAN=0 __DTMCP_USER_PC=; fi
        __dtmcp_adopt
    fi
    local __dtmcp_pc=$__DTMCP_USER_PC
    __DTMCP_USER_PC=
    __dtmcp_ret "$__dtmcp_s"
    __dtmcp_hook
    __DTMCP_USER_PC=$__dtmcp_pc
    return 0
}

# The prompt hook: reports how the last command ended, runs the user's
# prompt commands, then (re)wraps the prompts.  It captures `$?` and
# PIPESTATUS before anything else can change them, and always returns 0:
# under `set -e` a failing prompt command would end the shell.
__dtmcp_hook() {
    local __dtmcp_s=$? __dtmcp_ps=("${PIPESTATUS[@]}") - __dtmcp_on=0
    set +eux
    if [[ ${__DTMCP_NONCE-} != "${__DTMCP_NONCE_SEEN-}" || -z ${__DTMCP_ON-} ]]; then __dtmcp_keys; fi
    if [[ ${__DTMCP_PID-} != "$$" ]]; then __dtmcp_start; fi
    # Markers only go to the session's own terminal: a shell on a pty of
    # its own (expect, pexpect) must see its prompts unchanged.
    if [[ $__DTMCP_ON == 1 && -n ${__DTMCP_TTY-} && /dev/stderr -ef $__DTMCP_TTY ]] && shopt -q promptvars; then
        __dtmcp_on=1
    fi
    if [[ $__DTMCP_RAN == 1 ]]; then
        __DTMCP_RAN=0
        if [[ $__dtmcp_on == 1 ]]; then __dtmcp_done "$__dtmcp_s" "${__dtmcp_ps[@]}"; fi
    fi
    if [[ -n ${__DTMCP_USER_PC-} ]]; then
        __dtmcp_ret "$__dtmcp_s"
        eval "$__DTMCP_USER_PC"
    fi
    # Someone changed PROMPT_COMMAND (or the user's part did): take what
    # it holds now as the user's part.
    if [[ ${PROMPT_COMMAND-} != __dtmcp_hook || ${PROMPT_COMMAND@a} == *a* ]]; then __dtmcp_adopt; fi
    __dtmcp_wrap "$__dtmcp_on"
    return 0
}

if [[ -z ${__DTMCP_TTY-} && -t 0 ]]; then
    __DTMCP_TTY=$(tty 2>/dev/null) || __DTMCP_TTY=
fi
export __DTMCP_TTY
# A zsh started inside reads the startup files of our ZDOTDIR, which read
# the user's own (from the ZDOTDIR kept in __DTMCP_ZDOTDIR, else $HOME)
# and then load integration.zsh.
__dtmcp_z=${BASH_SOURCE[0]%/*}
if [[ $__dtmcp_z == "${BASH_SOURCE[0]}" ]]; then __dtmcp_z=.; fi
if [[ $__dtmcp_z != /* ]]; then __dtmcp_z=$PWD/$__dtmcp_z; fi
__dtmcp_z+=/zsh
if [[ -r $__dtmcp_z/.zshenv && ${ZDOTDIR-} != "$__dtmcp_z" ]]; then
    if [[ -n ${ZDOTDIR+x} ]]; then export __DTMCP_ZDOTDIR=$ZDOTDIR; else unset __DTMCP_ZDOTDIR; fi
    export ZDOTDIR=$__dtmcp_z
fi
unset __dtmcp_z
# An integrated zsh hands a bash started inside this file through
# PROMPT_COMMAND (bash reads it from the environment); that loader is not
# one of the user's prompt commands.
if [[ -n ${__DTMCP_BASH_LOADER-} && ${PROMPT_COMMAND@a} != *a* ]]; then
    PROMPT_COMMAND=${PROMPT_COMMAND//"$__DTMCP_BASH_LOADER"/}
    unset __DTMCP_BASH_LOADER
fi
# ctrl+g in vi's command mode goes back to insert mode (readline's default
# there is abort, which stays in command mode). A run presses ctrl+g after
# an agent's Escape, so that its command is typed as text in either mode.
if [[ $- == *i* ]]; then
    bind -m vi-command '"\C-g": vi-insertion-mode' 2>/dev/null
    # No history expansion: agents write their commands for a shell
    # without it, and `git commit -m "done!!"` would take in the last
    # command (or fail on "event not found").  `set -H` brings it back.
    set +H
fi
__dtmcp_keys
__dtmcp_adopt
export -f __dtmcp_ret __dtmcp_keys __dtmcp_pct __dtmcp_start __dtmcp_done __dtmcp_adopt __dtmcp_wrap __dtmcp_rescue __dtmcp_hook
