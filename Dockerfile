# syntax=docker/dockerfile:1.7
# The oncekey server image: a release build of the `oncekey` binary on a distroless, non-root base.
#
#   docker build -t oncekey:dev .
#   docker run --rm -p 50051:50051 -p 9090:9090 -e ONCEKEY_ALLOW_UNAUTHENTICATED=true oncekey:dev   # dev only
#
# The image listens on 0.0.0.0, so `serve` refuses to start without a tokens file
# (ONCEKEY_TOKENS_FILE, mount it) or the explicit dev switch ONCEKEY_ALLOW_UNAUTHENTICATED=true.
# The CQL migrations are compiled into the binary (include_str!), so `oncekey migrate` needs no
# files from the image. Pin both base images by digest in your registry mirror for reproducible
# builds.

ARG RUST_VERSION=1.95

# ---- build -------------------------------------------------------------------------------------
FROM rust:${RUST_VERSION}-slim-trixie AS build
WORKDIR /src
ENV CARGO_TERM_COLOR=never \
    CARGO_INCREMENTAL=0
# Everything the workspace needs to resolve (every member's manifest, the proto files for build.rs,
# the migrations for include_str!); .dockerignore keeps targets, data and VCS out.
COPY . .
# Cache mounts keep the registry and the target dir between builds (BuildKit); the binary is
# copied out of the cached target dir before the step ends.
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/usr/local/cargo/git \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked -p oncekey-server --bin oncekey \
 && install -D -m 0755 target/release/oncekey /out/oncekey \
 && install -d -m 0750 -o 65532 -g 65532 /out/data

# ---- run ---------------------------------------------------------------------------------------
# distroless/cc: glibc + libgcc + CA certificates, no shell, no package manager; the :nonroot tag
# runs as uid/gid 65532. Same Debian release as the build stage, so the glibc matches.
FROM gcr.io/distroless/cc-debian13:nonroot
COPY --from=build /out/oncekey /usr/local/bin/oncekey
# Owned by the runtime user, so the embedded store also works without a mounted volume.
COPY --from=build --chown=65532:65532 /out/data /var/lib/oncekey
# The embedded store's data (mount a volume here) and the listeners on every interface.
ENV ONCEKEY_DATA_DIR=/var/lib/oncekey \
    ONCEKEY_LISTEN=0.0.0.0:50051 \
    ONCEKEY_ADMIN_LISTEN=0.0.0.0:9090
WORKDIR /var/lib/oncekey
USER 65532:65532
EXPOSE 50051 9090
ENTRYPOINT ["oncekey"]
CMD ["serve"]
