FROM swr.cn-south-1.myhuaweicloud.com/ascendhub/cann:8.5.1-910b-ubuntu22.04-py3.11
RUN pip install --no-cache-dir requests==2.32.0 && \
    source /usr/local/Ascend/ascend-toolkit/set_env.sh
RUN make -C /src; source /opt/env.sh
RUN source /opt/env.sh && make -C /src
