# docent-terminal-mcp: .zshrc of the ZDOTDIR given to a session's zsh.
#
# zsh reads its startup files from $ZDOTDIR, which points here, so that
# a zsh started inside an integrated shell is integrated too. This file
# reads the user's own .zshrc -- from their ZDOTDIR (kept in
# __DTMCP_ZDOTDIR) or else $HOME -- with ZDOTDIR set back to theirs
# while it runs, then points ZDOTDIR here again for the next file.
# It runs at top level, not in a function, so the user's typeset and
# setopt lines mean what they always mean.
if (( ${+__DTMCP_ZDOTDIR} )); then ZDOTDIR=$__DTMCP_ZDOTDIR; else unset ZDOTDIR; fi
if [[ -r ${ZDOTDIR:-$HOME}/.zshrc ]]; then
    source ${ZDOTDIR:-$HOME}/.zshrc
fi
# The user's file may have moved ZDOTDIR: their next files are there.
if (( ${+ZDOTDIR} )); then export __DTMCP_ZDOTDIR=$ZDOTDIR; else unset __DTMCP_ZDOTDIR; fi
export ZDOTDIR=${__DTMCP_ZSH_DIR:-${${(%):-%x}:A:h}}
# The session's own commands (docent-terminal-mcp ssh, into) first on
# PATH, which the user's files may have set afresh.
if [[ -n ${__DTMCP_BIN-} && :$PATH: != *:$__DTMCP_BIN:* ]]; then
    PATH=$__DTMCP_BIN:$PATH
fi
# Interactive: load the integration (it orders its hooks to come first and
# last among what the user set up so far, and again at each prompt).
if [[ -r $ZDOTDIR/../integration.zsh ]]; then
    source $ZDOTDIR/../integration.zsh
fi
