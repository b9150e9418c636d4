# Read last by a JupyterLab terminal's shell under `make lab` (see ../terminal.sh): the course's
# Python first, whatever the start-up files put there; the prompt says so.
PATH="$CKPT_BIN:$PATH"
export PATH
PS1="(course) ${PS1-\$ }"
