"""Prints the folder to give fairseq as ``--user-dir``: ``--user-dir "$(python -m biofairseq.user_dir)"``."""

import os

USER_DIR = os.path.dirname(os.path.abspath(__file__))

if __name__ == "__main__":
    print(USER_DIR)
