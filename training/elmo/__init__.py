"""ELMo's pretraining recipe (bilm-tf's) and feature-based fine-tuning."""
