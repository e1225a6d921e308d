# riskgate container: compiled JavaScript on a slim Node 24 LTS, run as a non-root user.
#   docker build -t riskgate .
#   docker run -p 8080:8080 --env-file riskgate.env riskgate
# The vendor is configured by environment variables (README, "Configuration"); there is no
# embedded sandbox in the image: without RISKGATE_SIGNALS_URL it stops with a message.
# Policies are baked in from policies/ at /app/policies; mount your own over it (read-only is fine;
# deploy/policy-configmap does so from a ConfigMap). The CLI is in the image too, for an init
# container that refuses a bad policy before the service starts:
#   command: ["riskgate", "policy", "check", "/app/policies"]   (deploy/riskgate.yaml)
# The base image is named by tag: no registry is reachable where this file is written, so no digest
# could be read truthfully. Pin it where you build: FROM node:24-slim@sha256:<digest of your pull>.

FROM node:24-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
# The sandbox and its dev launcher stay out of the image; then only runtime dependencies remain.
# The console's stylesheet and script are files of the package, beside its compiled pages.
RUN npx tsc -p tsconfig.build.json \
 && cp -r src/console/assets dist/console/assets \
 && rm -rf dist/sandbox dist/dev \
 && npm prune --omit=dev --no-audit --no-fund

FROM node:24-slim
# One process per container: the orchestrator scales pods (docs/operations.md, "Workers").
ENV NODE_ENV=production RISKGATE_PORT=8080 RISKGATE_POLICY_PATH=/app/policies \
    RISKGATE_STATE_DIR=/var/lib/riskgate RISKGATE_WORKERS=1 RISKGATE_HOST=0.0.0.0
# RISKGATE_STATE_DIR: one container's embedded database and outbox and the Log API follower's
# checkpoint: mount a volume here to keep them. Replicas keep none of it here: they share PostgreSQL
# and Redis (docs/operations.md, "Replicated means shared"; deploy/ mounts nothing writable).
RUN mkdir -p /var/lib/riskgate && chown node:node /var/lib/riskgate
WORKDIR /app
COPY --from=build /app/package.json ./
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
COPY bin ./bin
RUN ln -s /app/bin/riskgate.js /usr/local/bin/riskgate
COPY policies ./policies
# The image's `node` user, by number: Kubernetes' runAsNonRoot can verify a uid, never a name.
USER 1000:1000
EXPOSE 8080
HEALTHCHECK --interval=10s --timeout=2s --start-period=10s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:'+process.env.RISKGATE_PORT+'/healthz').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"]
# node is PID 1 and handles SIGTERM itself: stop accepting, finish decisions, drain actions and log.
CMD ["node", "dist/main.js"]
