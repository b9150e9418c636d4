# zsh in a JupyterLab terminal under `make lab` (see ../../terminal.sh): the learner's own .zshrc,
# then the course's Python first on PATH; ZDOTDIR goes back to the learner's.
ZDOTDIR=$CKPT_ZDOTDIR
[[ -f $ZDOTDIR/.zshrc ]] && source "$ZDOTDIR/.zshrc"
source "$CKPT_TERMINAL/venv.sh"
