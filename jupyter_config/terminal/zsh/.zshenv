# zsh in a JupyterLab terminal under `make lab` (see ../../terminal.sh): ZDOTDIR points here, so
# this reads the learner's own .zshenv, and zsh then reads the .zshrc beside this.
_ckpt_here=$ZDOTDIR
ZDOTDIR=$CKPT_ZDOTDIR
[[ -f $ZDOTDIR/.zshenv ]] && source "$ZDOTDIR/.zshenv"
CKPT_ZDOTDIR=$ZDOTDIR  # where the learner's .zshenv may have moved it
ZDOTDIR=$_ckpt_here
unset _ckpt_here
