# How `make lab` starts each JupyterLab terminal (jupyter_server_config.py beside this names it,
# with the bin folder of the server's Python environment as $1): at the top of the repository
# (where `make check`, `make practice` ... run), in the learner's own shell ($SHELL: bash, zsh, or
# another through the POSIX $ENV file), interactive, its usual start-up files read, and then that
# bin folder put first on PATH. JupyterLab's default (a login shell where the server's output is
# not a terminal) reads /etc/profile, which resets PATH, and a start-up file (pyenv, conda) may put
# another Python first: `python` there was not the course's.
here=$(CDPATH='' cd -- "$(dirname -- "$0")" && pwd)
top=$(dirname -- "$here")
export CKPT_BIN="${1:-$top/.venv/bin}" CKPT_TERMINAL="$here/terminal"
cd -- "$top" || exit 1
shell=${SHELL:-/bin/sh}
command -v "$shell" >/dev/null 2>&1 || shell=/bin/sh
case ${shell##*/} in
  bash) exec "$shell" --rcfile "$CKPT_TERMINAL/bashrc" -i ;;
  zsh) export CKPT_ZDOTDIR="${ZDOTDIR:-$HOME}" ZDOTDIR="$CKPT_TERMINAL/zsh"; exec "$shell" -i ;;
  *) export CKPT_ENV="${ENV-}" ENV="$CKPT_TERMINAL/shrc"; exec "$shell" -i ;;
esac
