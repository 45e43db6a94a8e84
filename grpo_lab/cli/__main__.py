from grpo_lab.cli import app

app()
