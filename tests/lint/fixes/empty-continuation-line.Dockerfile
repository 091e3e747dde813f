FROM ubuntu:22.04
RUN apt-get update && \

    apt-get install -y --no-install-recommends git && \
   
    rm -rf /var/lib/apt/lists/*

RUN echo ok > /tmp/ok
