"""OpenAI GPT's pretraining recipe and fine-tuning (the paper's comparison system)."""
