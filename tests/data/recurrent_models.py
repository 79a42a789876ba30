"""Small recurrent models for tests/test_zoo_seq.py: cells, time-major and multi-layer forms."""

import torch
from torch import nn


class Cells(nn.Module):
    """nn.LSTMCell then nn.GRUCell, one step each from a zero state: [1, 6] -> [1, 5]."""

    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTMCell(6, 7)
        self.gru = nn.GRUCell(7, 5)

    def forward(self, x):
        h, _ = self.lstm(x)
        return self.gru(h)


class TimeMajorLstm(nn.Module):
    """[1, 9, 4] -> transpose -> 2-layer time-major LSTM (no biases) -> h_n of both layers."""

    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(4, 8, num_layers=2, bias=False)

    def forward(self, x):
        _, (h, _) = self.lstm(x.transpose(0, 1))
        return h


def cells():
    torch.manual_seed(0)
    return Cells().eval(), (torch.randn(1, 6),)


def time_major_lstm():
    torch.manual_seed(0)
    return TimeMajorLstm().eval(), (torch.randn(1, 9, 4),)
