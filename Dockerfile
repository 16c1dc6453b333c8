# The oncekey server image: the release binary on an empty base, non-root, no shell.
#
# The build context is NOT the repository: `scripts/image stage` prepares it from the release binary
# (rootfs/: the binary, the shared libraries ldd names and their loader, CA certificates, an
# /etc/passwd with the user 65532; data/: the empty data dir) and copies this file beside it.
# So any OCI builder builds the same image, with or without access to a registry:
#
#   scripts/image build                       # here: release build + stage + buildah bud
#   docker build -t oncekey/oncekey:0.1.0 "$(scripts/image stage)"   # elsewhere
#
# The image listens on 0.0.0.0, so `serve` refuses to start without a tokens file
# (ONCEKEY_TOKENS_FILE, mount it) or the explicit dev switch ONCEKEY_ALLOW_UNAUTHENTICATED=true.
# The CQL migrations are compiled into the binary, so `oncekey migrate` needs no other files.
FROM scratch

ARG VERSION=dev
ARG REVISION=unknown
ARG SOURCE=unknown
LABEL org.opencontainers.image.title="oncekey" \
      org.opencontainers.image.description="Shared, tenant-scoped idempotency ledger served over gRPC" \
      org.opencontainers.image.source="${SOURCE}" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.licenses="Apache-2.0"

COPY rootfs/ /
# Owned by the runtime user, so the embedded store also works without a mounted volume.
COPY --chown=65532:65532 data/ /var/lib/oncekey/

# The embedded store's data (mount a volume here) and the listeners on every interface.
ENV ONCEKEY_DATA_DIR=/var/lib/oncekey \
    ONCEKEY_LISTEN=0.0.0.0:50051 \
    ONCEKEY_ADMIN_LISTEN=0.0.0.0:9090 \
    SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt
WORKDIR /var/lib/oncekey
USER 65532:65532
EXPOSE 50051 9090
VOLUME ["/var/lib/oncekey"]
ENTRYPOINT ["/usr/local/bin/oncekey"]
CMD ["serve"]
